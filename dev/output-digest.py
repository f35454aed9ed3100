#!/usr/bin/env python3
"""Runs the shipped pipelines that write HDF5 and prints one SHA-256 per
dataset, so two builds (before and after a refactor, CPU or GPU) can be
compared bit for bit:

    dev/output-digest.py --build build > after.txt
    diff before.txt after.txt

Each pipeline runs in a fresh directory with the engine's own `gpu:`
setting (auto: the GPU where there is one). Attributes are left out: some
record when and where the file was written."""
import argparse
import hashlib
import os
import subprocess
import sys
import tempfile

import h5py
import numpy as np

# Finite pipelines whose sinks are files; the control pipeline waits for
# requests and the network ones need peers, so they are not here.
PIPELINES = ["demo", "dsim-to-hdf5", "ddc-to-hdf5", "feng-wideband", "feng-2ant",
             "feng-wide-narrow", "xeng"]


def digest_file(path):
    rows = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            data = np.ascontiguousarray(obj[()])
            h = hashlib.sha256(data.tobytes()).hexdigest()
            rows.append(f"{name} {data.dtype.str} {list(data.shape)} {h}")

    with h5py.File(path, "r") as f:
        f.visititems(visit)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="meson build directory")
    ap.add_argument("--only", nargs="*", help="pipeline names (default: all)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    cbf_run = os.path.join(os.path.abspath(args.build), "tools", "cbf-run")
    failed = 0
    for name in args.only or PIPELINES:
        yaml = os.path.join(root, "pipelines", name + ".yaml")
        with tempfile.TemporaryDirectory(prefix="cbf-digest-") as tmp:
            os.makedirs(os.path.join(tmp, "out"))
            r = subprocess.run([cbf_run, yaml, "--quiet"], cwd=tmp, capture_output=True,
                               text=True)
            if r.returncode:
                print(f"{name}: cbf-run exited {r.returncode}: {r.stderr.strip()}")
                failed += 1
                continue
            files = []
            for d, _, names in os.walk(tmp):
                files += [os.path.join(d, n) for n in names if n.endswith(".h5")]
            for f in sorted(files):
                for row in digest_file(f):
                    print(f"{name}/{os.path.relpath(f, tmp)}:{row}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
