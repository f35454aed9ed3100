#!/usr/bin/env python3
"""The array as separate processes over loopback multicast: 1 digitiser
process (4 antennas, a group per polarisation), 4 F-engines, 2 X-engines of
512 channels each, all cbf-run, wired by pipelines/array-*.yaml. The
visibilities of each X-engine must equal the matching channels of the
single-process array (pipelines/demo.yaml with the same parameters), and no
antenna may be flagged.

usage: array.py CBF_RUN
"""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy not importable ({e})")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
PIPE = os.path.join(ROOT, "pipelines")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from cbf_array import ArrayError, run_array  # noqa: E402
LENGTH = 8388608
DUMP = 4


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    cbf_run = sys.argv[1]
    # Distinct group ports per run so parallel test runs cannot cross.
    base = 20000 + (os.getpid() % 2000) * 16
    with tempfile.TemporaryDirectory() as tmp:
        try:
            files = run_array(cbf_run, PIPE, tmp, LENGTH, DUMP, base)
        except ArrayError as e:
            log = str(e).split("see ")[-1]
            fail(f"{e}: {open(log).read()[-3000:] if os.path.exists(log) else ''}")
        ref_path = os.path.join(tmp, "ref.h5")
        subprocess.run([cbf_run, os.path.join(PIPE, "demo.yaml"), "--quiet", "--set", f"dsim.length={LENGTH}",
                        "--set", f"corr.heap_accumulation_threshold={DUMP}", "--set", f"sink.path={ref_path}"],
                       check=True, timeout=240)
        ref = h5py.File(ref_path)["reduce"]
        ref_vis, ref_ts = ref["data"][()], ref["timestamp"][()]    # [dump][channel][bl x 4][2]
        for x, path in enumerate(files):
            got = h5py.File(path)["reduce"]
            vis, ts = got["data"][()], got["timestamp"][()]
            if len(ts) == 0 or not np.array_equal(ts, ref_ts):
                fail(f"X-engine {x}: dump timestamps {ts} != {ref_ts}")
            if not got["present"][()].all():
                fail(f"X-engine {x}: flagged antennas {np.argwhere(got['present'][()] == 0)}")
            if not np.array_equal(vis, ref_vis[:, 512 * x:512 * (x + 1)]):
                fail(f"X-engine {x}: visibilities differ from the single-process array")
        print(f"ok: 4 F-engines and 2 X-engines in 7 processes (scripts/cbf_array.py): {len(ref_ts)} dumps "
              f"x 1024 channels identical to the single-process array")
    return 0


if __name__ == "__main__":
    sys.exit(main())
