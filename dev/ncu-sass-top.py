#!/usr/bin/env python3
"""The SASS instructions with the most warp-stall samples in an Nsight Compute
source-page CSV (ncu --page source --csv --print-source sass), with each
one's share of all samples and its top stall reasons: what a kernel waits on,
in a few lines instead of megabytes. Usage: ncu-sass-top.py FILE [N]"""
import csv
import sys


def main():
    path, n = sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 25
    with open(path, newline="") as f:
        rows = [r for r in csv.reader(f)]
    head = next(i for i, r in enumerate(rows) if "Source" in r and "Address" in r)
    cols, body = rows[head], rows[head + 1:]
    src, samp = cols.index("Source"), cols.index("Warp Stall Sampling (All Samples)")
    reasons = [i for i, c in enumerate(cols) if c.startswith("stall_")]

    def num(x):
        try:
            return float(x.replace(",", ""))
        except ValueError:
            return 0.0

    total = sum(num(r[samp]) for r in body if len(r) > samp) or 1.0
    body.sort(key=lambda r: -num(r[samp]) if len(r) > samp else 0)
    for r in body[:n]:
        top = sorted(((num(r[i]), cols[i]) for i in reasons), reverse=True)[:3]
        why = ", ".join(f"{c[6:]} {v:.0f}" for v, c in top if v > 0)
        print(f"{100 * num(r[samp]) / total:5.1f}%  {r[src][:60]:60s}  {why}")


if __name__ == "__main__":
    main()
