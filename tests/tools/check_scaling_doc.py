#!/usr/bin/env python3
"""docs/scaling.md's figures are cbf-array's: every block introduced by
`<!-- cbf-array pipelines/plans/NAME.yaml --figures -->` must be exactly what
that command prints (run from the source root), and every row of the arrays
table (first cell naming `NAME`) must hold the counts that output gives.

usage: check_scaling_doc.py SOURCE_ROOT CBF_ARRAY"""
import os
import re
import subprocess
import sys

BLOCK = re.compile(r"<!-- cbf-array (pipelines/plans/[\w.-]+\.yaml) --figures -->\n```text\n(.*?)```", re.S)


def figures(root, cbf_array, plan):
    r = subprocess.run([cbf_array, plan, "--figures"], cwd=root, capture_output=True, text=True)
    if r.returncode:
        raise SystemExit(f"FAIL: cbf-array {plan} --figures: exit {r.returncode}: {r.stderr}")
    return r.stdout


def row_of(out):
    """The arrays table's cells, from the tool's output."""
    f = re.search(r"-> (\d+) antennas per GPU \((.+?) binds\): (\d+) GPUs in (\d+) hosts", out)
    x = re.search(r"-> \d+ \((.+?) binds\); (\d+) X-engines of \d+ channels.*?in (\d+) hosts", out, re.S)
    t = re.search(r"totals: (\d+) hosts, (\d+) GPUs, (\d+) NICs; switch ports: .*?= (\d+);", out)
    g = re.search(r"multicast groups: .*?= (\d+);", out)
    a = re.search(r": (\d+) antennas", out)
    return [a[1], f[3], f[4], x[2], x[3], t[1], t[2], t[3], t[4], g[1], f"{f[2]}, {x[1]}"]


def main():
    root, cbf_array = sys.argv[1], os.path.abspath(sys.argv[2])
    doc = open(os.path.join(root, "docs", "scaling.md")).read()
    blocks = BLOCK.findall(doc)
    if len(blocks) < 3:
        print(f"FAIL: docs/scaling.md has {len(blocks)} cbf-array --figures blocks, want the three arrays'")
        return 1
    outs = {}
    for plan, text in blocks:
        outs[os.path.basename(plan)[:-5]] = out = figures(root, cbf_array, plan)
        if out != text:
            print(f"FAIL: docs/scaling.md's block for {plan} is not what cbf-array prints now:\n{out}")
            return 1
    rows = 0
    for line in doc.splitlines():
        m = re.match(r"\| [^|]*`([\w.-]+)`[^|]* \|(.*)\|$", line)
        if not m or m[1] not in outs:
            continue
        cells = [c.strip() for c in m[2].split("|")]
        want = row_of(outs[m[1]])
        if cells != want:
            print(f"FAIL: docs/scaling.md's row for {m[1]}: {cells}, cbf-array says {want}")
            return 1
        rows += 1
    if rows != len(outs):
        print(f"FAIL: {rows} table rows for {len(outs)} plans")
        return 1
    print(f"ok: {len(blocks)} figure blocks and {rows} table rows of docs/scaling.md match cbf-array")
    return 0


if __name__ == "__main__":
    sys.exit(main())
