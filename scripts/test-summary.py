#!/usr/bin/env python3
"""Reads meson's testlog.json and prints the closing line of a test run.

A test that exits 77 is meson's SKIP (GPU tests without a GPU, interop tests
without their peer); it is listed with its reason and never counted as passed."""
import json
import sys

passed = failed = skipped = 0
skipped_names = []
# --extra "NAME=OK|FAIL": a check run outside meson test (scripts/test.sh's
# build without CUDA), counted like a test.
args = sys.argv[2:]
while args[:1] == ["--extra"] and len(args) >= 2:
    name, _, result = args[1].rpartition("=")
    if result == "OK":
        passed += 1
    else:
        failed += 1
        print(f"failed {name}")
    args = args[2:]
with open(sys.argv[1]) as f:
    for line in f:
        if not line.strip():
            continue
        t = json.loads(line)
        r = t["result"]
        if r in ("OK", "EXPECTEDFAIL"):
            passed += 1
        elif r == "SKIP":
            skipped += 1
            reason = (t.get("stdout") or "").strip().splitlines()
            skipped_names.append(f'{t["name"]}: {reason[-1] if reason else "skipped"}')
        else:
            failed += 1
for s in skipped_names:
    print(f"skipped {s}")
print(f"{passed} passed, {failed} failed, {skipped} skipped")
sys.exit(1 if failed else 0)
