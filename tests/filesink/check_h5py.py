#!/usr/bin/env python3
"""filesink's file read by h5py, as an astronomer's script would: layout,
attributes, and a noiseless dsim tone decoded with numpy equal to
rint(FS A cos(2 pi f (t - d) / fs + phi)) computed here in float64.
Exit 77 (skipped) without h5py/numpy or before cbf-run is built."""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)

cbf_run = os.path.join(os.environ.get("CBF_BUILD_ROOT", ""), "tools", "cbf-run")
if not os.access(cbf_run, os.X_OK):
    print("skipped: cbf-run is not built yet")
    sys.exit(77)

FS_RATE, BITS, SPC, BUFS = 1712e6, 10, 16384, 3
TONES = [(123.4e6, 0.6, 0.3, -1.2), (501.0e6, 0.3, 2.0, 0.1)]
DELAYS = [0.0, 6.25]

tones_yaml = ", ".join(f"{{frequency: {f!r}, amplitude: {a!r}, phase_x: {px!r}, phase_y: {py!r}}}"
                       for f, a, px, py in TONES)
work = tempfile.mkdtemp(prefix="cbf-h5py-")
path = os.path.join(work, "tone.h5")
yaml = f"""engine: {{gpu: none}}
nodes:
  dsim:
    plugin: dsim
    params: {{antennas: 2, bits: {BITS}, samples_per_chunk: {SPC}, length: {SPC * BUFS},
             tones: [{tones_yaml}], noise: 0, delays: {DELAYS}, missing: [1]}}
  sink:
    plugin: filesink
    params: {{path: {path}}}
edges:
  - dsim.out -> sink.in
"""
with open(os.path.join(work, "tone.yaml"), "w") as f:
    f.write(yaml)
run = subprocess.run([cbf_run, os.path.join(work, "tone.yaml")], cwd=work,
                     capture_output=True, text=True)
assert run.returncode == 0, run.stderr

with h5py.File(path, "r") as f:
    g = f["dsim"]
    data = g["data"]
    assert data.dtype == np.uint8, data.dtype
    assert data.shape == (BUFS, 2, 2, SPC * BITS // 8), data.shape
    assert [a.decode() for a in data.attrs["axes"]] == ["time", "antenna", "pol", "byte"]
    assert g.attrs["bits"] == BITS and g.attrs["adc_sample_rate"] == FS_RATE
    assert g.attrs["producer_plugin"].decode() == "dsim"
    assert int(g["params"].attrs["antennas"].decode()) == 2
    assert list(g["timestamp"][:]) == [i * SPC for i in range(BUFS)]
    present = g["present"][:]
    heaps = SPC // 4096
    assert present.shape == (BUFS, 2 * 2 * heaps)
    # missing: [1] is heap 1 of every input: buffer 0, second flag of each stream
    want_present = np.ones_like(present)
    want_present[0, 1::heaps] = 0
    assert (present == want_present).all(), present
    assert list(g["missing"][:]) == [4, 0, 0]
    raw = data[:]

# Big-endian packed 10-bit fields: sample k is bits [10k, 10k + 10) MSB first.
bits = np.unpackbits(raw, axis=-1).reshape(BUFS, 2, 2, SPC, BITS)
vals = (bits.astype(np.int64) << np.arange(BITS - 1, -1, -1)).sum(axis=-1)
vals = np.where(vals >= 1 << (BITS - 1), vals - (1 << BITS), vals)

t = np.arange(BUFS * SPC, dtype=np.float64)
fs = (1 << (BITS - 1)) - 1
checked = 0
for a in range(2):
    for p in range(2):
        x = np.zeros_like(t)
        for f_hz, amp, px, py in TONES:
            x += fs * amp * np.cos(2 * np.pi * f_hz * (t - DELAYS[a]) / FS_RATE + (px, py)[p])
        got = vals[:, a, p, :].reshape(-1)
        # Heap 1 is missing: its bytes are zero, the rest is the tone.
        keep = np.ones(t.size, bool)
        keep[4096:8192] = False
        # float64 phases here are good to ~1e-9 LSB over 49152 samples: only
        # values within 1e-6 of a rounding boundary may round either way.
        near = np.abs(x - np.floor(x) - 0.5) < 1e-6
        ok = keep & ~near
        assert (got[ok] == np.rint(x[ok])).all(), (a, p, np.flatnonzero(got[ok] != np.rint(x[ok]))[:5])
        assert (got[~keep] == 0).all()
        checked += ok.sum()
print(f"h5py read back {checked} samples equal to the float64 tone model")
