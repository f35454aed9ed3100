#!/usr/bin/python3
"""scripts/run-array finds its cbf-run as the README says, and says so
plainly when it cannot (it once ended in a Python traceback for a
--build folder that did not exist, the README's `--build build-cpu` after
a quick start that builds ./build):
  - --build DIR that is no folder, or a folder without tools/cbf-run:
    exit 2, one line naming DIR and what is missing, no traceback;
  - no --build: the source tree's ./build/tools/cbf-run is the one started
    (a stand-in cbf-run in a copy of the tree records that it ran);
  - no --build and no ./build (nor an install around it): exit 2 naming
    where it looked.
The whole array through run-array is net_array's (tests/net/array.py runs
the same cbf_array.run_array) and, installed, runtime_install's.

Args: SOURCE_ROOT"""
import os
import shutil
import subprocess
import sys
import tempfile

failures = []


def check(ok, msg):
    if not ok:
        failures.append(msg)


def run(script, *args, cwd=None):
    return subprocess.run([script, *args], capture_output=True, text=True, timeout=120, cwd=cwd)


def clean_refusal(r, what, *want):
    check(r.returncode == 2, f"{what}: exit {r.returncode}, want 2: {r.stdout}{r.stderr}")
    check("Traceback" not in r.stderr, f"{what}: a traceback instead of a message:\n{r.stderr}")
    lines = r.stderr.strip().splitlines()
    check(len(lines) == 1 and lines[0].startswith("run-array: "), f"{what}: want one line 'run-array: ...': {r.stderr!r}")
    for w in want:
        check(w in r.stderr, f"{what}: the message does not name {w!r}: {r.stderr!r}")


def main(src):
    with tempfile.TemporaryDirectory() as tmp:
        tree = os.path.join(tmp, "src")
        os.makedirs(os.path.join(tree, "scripts"))
        for f in ("run-array", "cbf_array.py", "xeng-phases.py"):
            shutil.copy2(os.path.join(src, "scripts", f), os.path.join(tree, "scripts", f))
        os.symlink(os.path.join(src, "pipelines"), os.path.join(tree, "pipelines"))
        script = os.path.join(tree, "scripts", "run-array")

        missing = os.path.join(tmp, "build-cpu")
        clean_refusal(run(script, "--build", missing), "--build (no such folder)", missing)
        clean_refusal(run(script, "--build", tmp), "--build (a folder, not a build)", tmp, "tools/cbf-run")
        clean_refusal(run(script, cwd=tmp), "no --build, no ./build", os.path.join(tree, "build", "tools", "cbf-run"))

        # A stand-in cbf-run: records its arguments and fails, so the
        # array stops at its first process (the beam receiver).
        tools = os.path.join(tree, "build", "tools")
        os.makedirs(tools)
        record = os.path.join(tmp, "ran")
        with open(os.path.join(tools, "cbf-run"), "w") as f:
            f.write(f"#!/bin/sh\necho \"$@\" >> '{record}'\nexit 3\n")
        os.chmod(os.path.join(tools, "cbf-run"), 0o755)
        r = run(script, "--out", os.path.join(tmp, "out"), cwd=tmp)
        check(r.returncode == 1 and "beams exited early (exit 3)" in r.stderr and "Traceback" not in r.stderr,
              f"default ./build: exit {r.returncode}, want 1 with 'beams exited early (exit 3)': {r.stdout}{r.stderr}")
        ran = open(record).read() if os.path.exists(record) else ""
        check(os.path.join(tree, "pipelines", "array-beams.yaml") in ran,
              f"default ./build: the tree's build/tools/cbf-run was not started with its pipelines (ran: {ran!r})")
        r = run(script, "--build", os.path.join(tree, "build"), "--out", os.path.join(tmp, "out"), cwd=tmp)
        check(r.returncode == 1 and "beams exited early (exit 3)" in r.stderr,
              f"--build DIR of a build: exit {r.returncode}, want 1 from the stand-in: {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    if failures:
        return 1
    print("ok: run-array starts ./build's cbf-run by default or --build DIR's, and refuses a folder "
          "that is not a build in one line")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
