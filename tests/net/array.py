#!/usr/bin/env python3
"""The array as separate processes over loopback multicast: 1 digitiser
process (4 antennas, a group per polarisation), 4 F-engines, 2 XB-engines
of 512 channels each (correlator and beamformer, 2 beams sent a group per
beam) and a beam receiver, all cbf-run, wired by pipelines/array-*.yaml.
The visibilities of each X-engine must equal the matching channels of the
single-process XB-engine (pipelines/xbeng.yaml with the same parameters,
whose visibilities are pipelines/demo.yaml's), and no antenna may be
flagged; the beams the beam receiver recorded from both X-engines' streams
must equal that XB-engine's beams bit for bit (dither included: its
counter is the absolute channel and spectrum), every heap present with
beam_ants 4.

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


def check_beams(got, ref):
    """Batches of the received beams by timestamp against the reference's."""
    step = int(ref.attrs["spectra_per_heap"] * ref.attrs["samples_between_spectra"])
    want = {}
    for ts, buf in zip(ref["timestamp"][()], ref["data"][()]):   # [batch][beam][channel][spectrum][2]
        for bt in range(buf.shape[0]):
            want[int(ts) + bt * step] = buf[bt]
    data, ts, present, ants = got["data"][()], got["timestamp"][()], got["present"][()], got["beam_ants"][()]
    if not present.all() or (ants != 4).any():
        fail(f"beam receiver: {(present == 0).sum()} (batch, beam) flags missing, beam_ants {np.unique(ants)}")
    n = 0
    for t, buf in zip(ts, data):
        for bt in range(buf.shape[0]):
            t_bt = int(t) + bt * step
            if t_bt not in want:
                fail(f"beam receiver: batch at timestamp {t_bt} is not in the single-process run")
            if not np.array_equal(buf[bt], want[t_bt]):
                fail(f"beams at timestamp {t_bt} differ from the single-process XB-engine's in "
                     f"{int((buf[bt] != want[t_bt]).sum())} values")
            n += 1
    if n != len(want):
        fail(f"beam receiver: {n} batches, the single-process run {len(want)}")
    return n


def check(cbf_run, tmp, files, beams, length=LENGTH, dump=DUMP, what="8 processes (scripts/cbf_array.py)"):
    """The array's X-engine files and beam file against the single-process
    XB-engine on the same dsim input (run here, into tmp); fails on the
    first difference. tests/net/multihost.py checks its hosts with it."""
    ref_path = os.path.join(tmp, "ref.h5")
    subprocess.run([cbf_run, os.path.join(PIPE, "xbeng.yaml"), "--quiet", "--set", f"dsim.length={length}",
                    "--set", f"corr.heap_accumulation_threshold={dump}", "--set", f"sink.path={ref_path}"],
                   check=True, timeout=240)
    ref_file = h5py.File(ref_path)
    ref = ref_file["reduce"]
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
    n_beam = check_beams(h5py.File(beams)["recv"], ref_file["beams"])
    print(f"ok: 4 F-engines, 2 XB-engines and a beam receiver in {what}: "
          f"{len(ref_ts)} dumps x 1024 channels and {n_beam} batches x 2 beams identical to the "
          f"single-process XB-engine")


def main():
    cbf_run = sys.argv[1]
    # Distinct group ports per run so parallel test runs cannot cross.
    base = 20000 + (os.getpid() % 2000) * 16
    with tempfile.TemporaryDirectory() as tmp:
        try:
            files, beams = run_array(cbf_run, PIPE, tmp, LENGTH, DUMP, base)
        except ArrayError as e:
            log = str(e).split("see ")[-1]
            fail(f"{e}: {open(log).read()[-3000:] if os.path.exists(log) else ''}")
        check(cbf_run, tmp, files, beams)
    return 0


if __name__ == "__main__":
    sys.exit(main())
