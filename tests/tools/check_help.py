#!/usr/bin/python3
"""Every tool's --help is whole and readable on an 80-column terminal.

For cbf-run, cbf-ctl, cbf-inspect, cbf-array, cbf-bench and each cbf-bench area the
build has: --help exits 0 and writes to standard output only (so it pipes
into less or head), the text ends with a newline, no line is wider than 80
columns (wider lines fold mid-word on a terminal of that width, which reads
as text cut mid-sentence), brackets and parentheses close, the text does
not end on a comma or a joining word, and the length is not that of a fixed buffer
(a text cut by snprintf stops at one). An area built without its GPU code
(cbf-bench feng in a CPU build) says so and is passed over.

Every tool's --version exits 0 and prints one line, the tool's name and
the project's version from meson.build (`cbf-run 0.1.0`), on standard
output only.

Args: BUILD_ROOT VERSION"""
import re
import subprocess
import sys

WIDTH = 80
BUFFER_SIZES = {n - d for n in (128, 256, 512, 1024, 2048, 4096, 8192) for d in (0, 1)}
JOINING = {"a", "an", "the", "of", "and", "or", "to", "with", "for", "in", "on",
           "by", "from", "as", "per", "at", "than", "that", "which", "when"}


def problems(text):
    out = []
    if not text:
        return ["empty"]
    if not text.endswith("\n"):
        out.append("does not end with a newline")
    if len(text.encode()) in BUFFER_SIZES:
        out.append(f"length {len(text.encode())} is a buffer size: cut?")
    for o, c in ("()", "[]", "{}"):
        if text.count(o) != text.count(c):
            out.append(f"'{o}' and '{c}' do not pair up")
    for n, line in enumerate(text.splitlines(), 1):
        if len(line) > WIDTH:
            out.append(f"line {n} is {len(line)} columns: {line!r}")
        if line != line.rstrip():
            out.append(f"line {n} ends in spaces")
    # A line folded by hand may end on a comma; the text may not.
    words = text.split()
    if words and (words[-1].endswith(",") or words[-1].lower() in JOINING):
        out.append(f"ends mid-sentence: ...{text[-60:]!r}")
    return out


def check_version(tools, version):
    bad = 0
    for name in ("cbf-run", "cbf-ctl", "cbf-inspect", "cbf-array", "cbf-bench"):
        r = subprocess.run(tools[name] + ["--version"], capture_output=True, text=True, timeout=30)
        want = f"{name} {version}\n"
        if r.returncode != 0 or r.stdout != want or r.stderr:
            bad += 1
            print(f"FAIL {name} --version: exit {r.returncode}, {r.stdout!r}, stderr {r.stderr[:200]!r};"
                  f" want {want!r}")
        else:
            print(f"ok {name} --version: {r.stdout.strip()}")
    return bad


def main(build, version):
    tools = {"cbf-run": [f"{build}/tools/cbf-run"],
             "cbf-ctl": [f"{build}/tools/cbf-ctl"],
             "cbf-inspect": [f"{build}/tools/cbf-inspect"],
             "cbf-array": [f"{build}/tools/cbf-array"],
             "cbf-bench": [f"{build}/tools/bench/cbf-bench"]}
    r = subprocess.run(tools["cbf-bench"] + ["--help"], capture_output=True, text=True)
    areas = re.findall(r"^  (\w+) ", r.stdout, re.M)
    if not areas:
        print(f"FAIL: no areas in cbf-bench --help:\n{r.stdout}{r.stderr}")
        return 1
    for a in areas:
        tools[f"cbf-bench {a}"] = tools["cbf-bench"] + [a]
    bad = check_version(tools, version)
    for name, cmd in tools.items():
        r = subprocess.run(cmd + ["--help"], capture_output=True, text=True, timeout=30)
        if name.startswith("cbf-bench ") and r.returncode == 1 and "built without CUDA" in r.stderr:
            print(f"{name}: built without CUDA, passed over")
            continue
        found = problems(r.stdout)
        if r.returncode != 0:
            found.append(f"exit {r.returncode}, not 0")
        if r.stderr:
            found.append(f"wrote to standard error: {r.stderr[:200]!r}")
        if found:
            bad += 1
            print(f"FAIL {name} --help:\n  " + "\n  ".join(found))
        else:
            print(f"ok {name} --help ({len(r.stdout.splitlines())} lines)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
