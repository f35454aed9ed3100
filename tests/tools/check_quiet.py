#!/usr/bin/env python3
"""cbf-run --quiet prints warnings and errors only, so a run that goes as
asked prints nothing (issue 31 item 18: it still warned on overwrite).

dsim -> filesink with `overwrite: true`, run three times: the first makes
the file; the second, --quiet, replaces it and prints nothing at all
(exit 0, the file rewritten); the third, without --quiet, says that it
replaces it (at info level), so the message is still there for those who
watch the log. A --quiet run whose file cannot be made still prints the
error.

Args: CBF_RUN"""
import json
import os
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def run(cbf_run, path, *extra):
    return subprocess.run([cbf_run, path, *extra], capture_output=True, text=True, timeout=120)


def main(cbf_run):
    with tempfile.TemporaryDirectory(prefix="cbf-quiet-") as tmp:
        out = os.path.join(tmp, "out.h5")
        doc = {"engine": {"gpu": "none"},
               "nodes": {"dsim": {"plugin": "dsim", "params": {"length": 65536, "samples_per_chunk": 65536}},
                         "sink": {"plugin": "filesink", "params": {"path": out, "overwrite": True}}},
               "edges": ["dsim.out -> sink.in"]}
        path = os.path.join(tmp, "quiet.yaml")
        with open(path, "w") as f:
            json.dump(doc, f)   # JSON is YAML
        r = run(cbf_run, path, "--quiet")
        if r.returncode or not os.path.exists(out):
            fail(f"first run: exit {r.returncode}, {r.stderr}")
        before = os.stat(out).st_mtime_ns
        os.utime(out, ns=(before - 10**9, before - 10**9))   # so a rewrite shows
        r = run(cbf_run, path, "--quiet")
        if r.returncode or os.stat(out).st_mtime_ns == before - 10**9:
            fail(f"--quiet over an existing file: exit {r.returncode}, file rewritten: "
                 f"{os.stat(out).st_mtime_ns != before - 10**9}; {r.stderr}")
        if r.stdout or r.stderr:
            fail(f"--quiet replacing a file with overwrite: true printed: {(r.stdout + r.stderr)[:500]!r}")
        print("ok: --quiet replaced the file (overwrite: true) and printed nothing")
        r = run(cbf_run, path)
        if r.returncode or f"{out} exists and is replaced (overwrite: true)" not in r.stderr:
            fail(f"without --quiet the replacement is not said: exit {r.returncode}, {r.stderr[-500:]!r}")
        print("ok: without --quiet it says the file is replaced")
        doc["nodes"]["sink"]["params"]["path"] = "/proc/no-such-dir/x.h5"
        with open(path, "w") as f:
            json.dump(doc, f)
        r = run(cbf_run, path, "--quiet")
        if r.returncode == 0 or "x.h5" not in r.stderr:
            fail(f"--quiet with a file that cannot be made: exit {r.returncode}, {r.stderr!r}")
        print(f"ok: --quiet still prints the error (exit {r.returncode})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
