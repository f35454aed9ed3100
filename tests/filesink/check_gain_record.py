#!/usr/bin/env python3
"""Runtime gain and delay changes recorded beside the data: a running
F-engine (dsim paced in real time at 1 Msample/s) writes fft_post.out,
fft_post.gains and pfb.delays to one file; cbf-ctl changes the gain twice
and the delay model's phase once mid-capture.
The gains group must hold the table at start and both changes, each
timestamped with the first spectrum that used it, and the data must agree:
the tone's channel, divided by the gain the record says was in force at
each spectrum's timestamp, is the same before and after every change (a
record off by one spectrum would leave a factor of 2 at the boundary), and
its phase less the recorded model's phase likewise (a quarter turn).
Exit 77 (skipped) without h5py/numpy or before cbf-run is built."""
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "tests", "control"))
from ctl_util import CBF_CTL, CBF_RUN, Engine, check, fail, feng_yaml, importable  # noqa: E402

h5py, np = importable("h5py", "numpy")

if not (os.access(CBF_RUN, os.X_OK) and os.access(CBF_CTL, os.X_OK)):
    print("skipped: cbf-run / cbf-ctl are not built yet")
    sys.exit(77)

RATE, CHANNELS, SPH = 1e6, 256, 64
STEP = 2 * CHANNELS
K = 64                                    # the tone's channel (channel-centred)

# The file path is left to the caller (YAML % path).
YAML = feng_yaml(
    dsim=f"antennas: 1, adc_sample_rate: {RATE}, samples_per_chunk: 65536, length: 0, "
         f"realtime: true, noise: 0.01, tones: [{{frequency: {K * RATE / STEP}, amplitude: 0.2}}]",
    pfb=f"channels: {CHANNELS}, taps: 4, spectra_per_buffer: {SPH}",
    post=f"spectra_per_heap: {SPH}, gain: [0.02, 0.0]",
    sink="{plugin: filesink, params: {path: %s}}",
    edges=["post.gains -> sink.in", "pfb.delays -> sink.in"])


def written(e, n):
    """Waits until the sink has written n buffers (sensors), 30 s at most."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        rc, reply, _ = e.request({"request": "sensors"})
        if rc == 0 and reply["sensors"]["nodes"]["sink"]["counters"]["buffers_written"] >= n:
            return
        time.sleep(0.05)
    fail(f"the sink did not write {n} buffers")


def check_tables(f, at1, at2, what=""):
    """The gains group of file f holds exactly three tables, each from the
    first spectrum at or after its `at`: the YAML's (0.02) at start, 0.04
    for both pols from at1, pol 1's 0.01 from at2. The spectra have no
    missing batches. Returns the spectra's group, the tables' timestamps
    and the tables."""
    g, r = f["post"], f["post.1"]
    check(r.attrs["type"] == b"cbf.feng.gains", "the second group records the gains")
    ts, tab = r["timestamp"][()], r["data"][()]       # [n][channel][pol][re_im]
    want = [[0.02, 0.02], [0.04, 0.04], [0.04, 0.01]]
    check(len(ts) == 3 and all(np.all(tab[i, :, q, 0] == np.float32(want[i][q])) and
                               np.all(tab[i, ..., 1] == 0) for i in range(3) for q in range(2)),
          f"three tables recorded{what}: {tab[:, 0]}")
    check(ts[0] == g["timestamp"][0], f"the table at start is in force from the first spectrum ({ts[0]})")
    for t, at in ((ts[1], at1), (ts[2], at2)):
        check(t == -(-at // STEP) * STEP, f"change requested at {at} took effect at {t}")
    check(np.all(g["present"][()] == 1), "no missing batches")
    return g, ts, tab


def gain(e, *args):
    rc, out, err = e.ctl("--json", "gain", "--node", "post", *args)
    check(rc == 0, f"cbf-ctl gain {' '.join(args)}: {out.strip()}{err.strip()}")
    return json.loads(out)["at"]


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-gains-") as tmp:
        path = os.path.join(tmp, "f.h5")
        e = Engine(YAML % path, os.path.join(tmp, "engine.yaml"))
        try:
            written(e, 4)
            at1 = gain(e, "0.04", "0")                # both pols, from the next spectrum
            # pol 1 only, at a timestamp inside a buffer and between spectra:
            # it takes effect at the next spectrum, mid-buffer.
            buf = SPH * STEP
            at2 = (at1 // buf + 12) * buf + 17 * STEP + 5
            check(gain(e, "--pol", "1", "--at", str(at2), "0.01", "0") == at2, "at as asked")
            written(e, at2 // buf + 6)
            at3 = (at2 // buf + 6) * buf + 9 * STEP   # the phase turns by pi/2, on a spectrum
            rc, out, err = e.ctl("--json", "delays", "--node", "pfb", "--at", str(at3),
                                 "0", "0", str(np.pi / 2), "0")
            check(rc == 0 and json.loads(out)["at"] == at3, f"cbf-ctl delays: {out}{err}")
            written(e, at3 // buf + 6)
            check(e.shutdown() == 0, "engine drained and exited 0")
        finally:
            e.kill()
        with h5py.File(path) as f:
            g, ts, tab = check_tables(f, at1, at2)
            data = g["data"][()].astype(np.float64)           # [buf][batch][chan][spec][pol][re_im]
            t0 = g["timestamp"][()]
            dl = f["pfb"]
            check(dl.attrs["type"] == b"cbf.feng.delays", "the third group records the delays")
            dts, model = dl["timestamp"][()], dl["data"][()]   # [n][pol][t0, d, rate, ph, phr]
            check(list(dts) == [t0[0], at3] and np.all(model[0] == 0) and
                  np.all(model[1, :, 0] == at3) and np.all(model[1, :, 3] == np.pi / 2) and
                  np.all(model[1, :, [1, 2, 4]] == 0),
                  f"two delay models recorded: at {list(dts)}, {model.tolist()}")
        r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cbf-describe"), path],
                           capture_output=True, text=True)
        check(r.returncode == 0 and f"from timestamp {ts[2]}" in r.stdout and
              "pol 1 0.01+0j" in r.stdout and "in group /post.1" in r.stdout and
              f"from timestamp {at3}" in r.stdout and "phase 1.5708 rad" in r.stdout,
              "cbf-describe lists the tables and where they are")
        x = data[:, :, K]                                     # [buf][batch][spec][pol][re_im]
        amp = np.hypot(x[..., 0], x[..., 1]).reshape(-1, 2)   # [spectrum][pol], time order
        spectra_ts = (t0[:, None] + np.arange(data.shape[1] * SPH)[None, :] * STEP).reshape(-1)
        in_force = np.array([tab[np.searchsorted(ts, t, side="right") - 1, K, :, 0]
                             for t in spectra_ts])             # [spectrum][pol]
        # The first spectra see a window reaching before the stream: skip the
        # first buffer. Quantisation (+-0.5 on ~18-72) and the noise stay
        # within 10% of the tone; a wrong boundary leaves a factor 2 or 4.
        norm = amp[SPH:] / in_force[SPH:]
        ratio = norm / np.median(norm, axis=0)
        check(np.all(np.abs(ratio - 1) < 0.1),
              f"|x| / recorded gain is constant over the capture (range {ratio.min():.3f} .. "
              f"{ratio.max():.3f}, {len(ratio)} spectra, {len(ts) - 1} changes)")
        # A channel-centred tone turns by a whole number of cycles from one
        # spectrum to the next, so its phase is constant but for the model's.
        # Quantisation of values of 18 or more moves it by < 0.03 rad.
        ph = np.angle(x[..., 0] + 1j * x[..., 1]).reshape(-1, 2)
        model_ph = model[np.searchsorted(dts, spectra_ts, side="right") - 1, :, 3]
        resid = np.angle(np.exp(1j * (ph[SPH:] - model_ph[SPH:])))
        resid = np.angle(np.exp(1j * (resid - resid[0])))
        check(np.all(np.abs(resid) < 0.1) and (spectra_ts >= at3).sum() > SPH,
              f"phase less the recorded model's phase is constant (|residual| <= "
              f"{np.abs(resid).max():.3f} rad, {(spectra_ts >= at3).sum()} spectra after the change)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
