#!/usr/bin/env python3
"""The filesink's file after SIGKILL at random moments (docs/reliability.md).

An uninterrupted run of a finite dsim -> filesink writes the reference
file. Then the same pipeline is run again KILLS times and killed with
SIGKILL once its file has grown to a size drawn from a seeded generator
(the seed is printed; CBF_KILL_SEED repeats a run), and once as soon as
the file has its name: the engine's own progress picks the moment, the
draw only picks which moment. Each killed
file must open with h5py (in SWMR mode, as the docs say; plainly after
`h5clear -s --increment` where that tool is installed), and every dataset of the
group must be a prefix of the reference's, equal value for value, holding
every buffer whose bytes had reached the file at the kill but the one in
flight: rows >= (size at kill - size with no rows) / bytes a row - 1.
A kill before the file reaches its name leaves no file there.

usage: check_kill.py CBF_RUN
"""
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/yaml not importable ({e})")
    sys.exit(77)

BUFFERS = 48
KILLS = 8
SAMPLES = 262144
DATASETS = ("data", "timestamp", "seq", "saturated", "missing", "present")


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def pipeline(tmp, name, out):
    doc = {"engine": {"gpu": "none"},
           "nodes": {"dsim": {"plugin": "dsim",
                              "params": {"antennas": 1, "samples_per_chunk": SAMPLES,
                                         "length": SAMPLES * BUFFERS}},
                     "sink": {"plugin": "filesink", "params": {"path": out}}},
           "edges": ["dsim.out -> sink.in"]}
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def read(path, swmr):
    with h5py.File(path, "r", swmr=swmr) as f:
        return {k: f["dsim"][k][:] for k in DATASETS if k in f["dsim"]}


def complete_rows(got, ref):
    """Rows, from the first, that every dataset holds equal to the reference."""
    m = min(len(v) for v in got.values())
    for k, v in got.items():
        for i in range(m):
            if not np.array_equal(v[i], ref[k][i]):
                m = i
                break
    return m


def check(name, got, ref, at_least):
    m = complete_rows(got, ref)
    lengths = {k: len(v) for k, v in got.items()}
    # The one buffer in flight may have its rows made but not yet filled.
    if any(n > m + 1 for n in lengths.values()):
        fail(f"{name}: rows {lengths}, but only {m} equal the uninterrupted run")
    if m < at_least:
        fail(f"{name}: {m} whole buffers; {at_least} had reached the file before the kill")
    return m, lengths


def main():
    cbf_run = sys.argv[1]
    seed = int(os.environ.get("CBF_KILL_SEED", random.SystemRandom().randrange(1 << 32)))
    print(f"seed {seed} (CBF_KILL_SEED={seed} repeats this run)")
    rng = random.Random(seed)
    h5clear = shutil.which("h5clear")
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "ref.h5")
        r = subprocess.run([cbf_run, pipeline(tmp, "ref", ref_path), "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode != 0:
            fail(f"the uninterrupted run: exit {r.returncode}: {r.stdout}")
        ref = read(ref_path, False)
        if len(ref["data"]) != BUFFERS:
            fail(f"the uninterrupted run wrote {len(ref['data'])} buffers, not {BUFFERS}")
        row = ref["data"][0].nbytes
        empty = os.path.getsize(ref_path) - BUFFERS * row   # the file's size with no rows, near enough
        # Kill moments: file sizes from before the first row to the last one.
        # The first as soon as the file has its name (the moment a file
        # once could not be opened), then sizes drawn up to the last row.
        targets = [None] + sorted(rng.uniform(0, 1) for _ in range(KILLS - 1))
        for j, frac in enumerate(targets):
            out = os.path.join(tmp, f"kill{j}.h5")
            target = 1 if frac is None else int(empty + frac * (BUFFERS - 1) * row)
            p = subprocess.Popen([cbf_run, pipeline(tmp, f"kill{j}", out), "--quiet"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            size = 0
            deadline = time.monotonic() + 120
            while p.poll() is None and time.monotonic() < deadline:
                size = os.path.getsize(out) if os.path.exists(out) else 0
                if size >= target:
                    break
                time.sleep(0.001)   # polling the file's growth, not waiting out a race
            if p.poll() is not None:
                fail(f"kill {j}: the run ended (exit {p.returncode}) before the file reached "
                     f"{target} bytes: {p.stdout.read()}")
            p.send_signal(signal.SIGKILL)
            p.wait(timeout=30)
            p.stdout.close()
            if not os.path.exists(out):
                if size:
                    fail(f"kill {j}: the file was there ({size} bytes) and is gone")
                print(f"ok: kill {j} before the file reached its name: no file")
                continue
            at_least = max(0, (size - empty) // row - 1)
            try:
                got = read(out, True)
            except Exception as e:   # noqa: BLE001 - any failure to open is the finding
                fail(f"kill {j} at {size} bytes: the file does not open: {e}")
            m, lengths = check(f"kill {j} at {size} bytes", got, ref, at_least)
            if h5clear:
                # The status flags say "open for writing", and the end of
                # allocated space may lag the newest chunk: both repaired.
                subprocess.run([h5clear, "-s", "--increment", out], check=True, timeout=60)
                try:
                    again = read(out, False)
                except Exception as e:   # noqa: BLE001
                    fail(f"kill {j} at {size} bytes: after h5clear the file does not open plainly: {e}")
                if complete_rows(again, ref) != m:
                    fail(f"kill {j}: after h5clear -s the file holds {complete_rows(again, ref)} "
                         f"whole buffers, {m} before")
            when = "as the file appeared" if frac is None else f"{frac:.2f} of the way"
            print(f"ok: kill {j} at {size} bytes ({when}): opens, {m} whole "
                  f"buffers (at least {at_least} had reached the file), rows {lengths['data']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
