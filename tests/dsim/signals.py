#!/usr/bin/env python3
"""dsim as a test instrument: its signals against a float64 model written
here from the formulas in plugins/dsim/README.md, and the `signals` request.

1. models: dsim -> filesink with 16-bit samples and no noise, for a comb, two
   impulse trains, per-input constants and all of them with a tone and
   per-antenna delays, in compute and replay mode. Every sample must be the
   model rounded to nearest: |sample - clip(FS x v)| <= 0.5 + 1e-6 LSB (dsim's
   phase tables agree with direct cosines to ~1e-12 of full scale, far below
   the 1e-6 allowed; a wrong harmonic, delay, offset or sign is >= 1 LSB).
2. request: a paced dsim (realtime) with a control socket; cbf-ctl asks
   `signals` to switch at a timestamp that is not a heap boundary, while the
   engine runs. Samples before it must be the old signal's model and samples
   from it on the new one's, in compute and in replay mode (where the new
   signal also gets a new period, shown by the `period` gauge once it is in
   force); a change at a timestamp already produced and lists that are not
   whole records must be refused.

usage: signals.py [models|request]   (both when not given)
"""
import json
import os
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

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from ctl_util import CBF_RUN, Engine, check, fail  # noqa: E402

BITS = 16
FULL = 2 ** (BITS - 1) - 1
FS_HZ = 1712e6


def grid(f, fs, period):
    return f if not period else np.rint(f / fs * period) * fs / period


def model(spec, antennas, n, t0, fs, period, delays):
    """[input][sample] float64 signal, in units of full scale."""
    t = t0 + np.arange(n, dtype=np.float64)
    out = np.zeros((2 * antennas, n))
    for a in range(antennas):
        d = delays[a] if delays else 0.0
        shift = int(np.rint(d))
        for p in range(2):
            v = out[2 * a + p]
            for tone in spec.get("tones", []):
                f = grid(tone["frequency"], fs, period)
                ph = tone.get("phase_x" if p == 0 else "phase_y", 0.0)
                v += tone["amplitude"] * np.cos(2 * np.pi * f * (t - d) / fs + ph)
            for comb in spec.get("combs", []):
                g = grid(comb["frequency"], fs, period)
                h = comb.get("harmonics", 0) or int(np.floor(fs / 2 / g))
                ph = comb.get("phase_x" if p == 0 else "phase_y", 0.0)
                for k in range(1, h + 1):
                    v += comb["amplitude"] * np.cos(2 * np.pi * k * g * (t - d) / fs + ph)
            for imp in spec.get("impulses", []):
                s = (t - shift - imp.get("offset", 0)).astype(np.int64)
                v += imp["amplitude"] * (s % imp["period"] == 0)
            consts = spec.get("constants", [])
            if consts:
                v += consts[0] if len(consts) == 1 else consts[2 * a + p]
    return out


def samples(path, antennas):
    """[input][sample] int16 of a 16-bit dsim capture, chunks joined."""
    g = h5py.File(path)["dsim"]
    data = g["data"][()]
    x = data.reshape(data.shape[0], 2 * antennas, -1).view(">i2").astype(np.int64)
    return x.transpose(1, 0, 2).reshape(2 * antennas, -1), g["timestamp"][()]


def close(got, v):
    """Largest |sample - clip(FS v)| in LSB."""
    want = np.clip(FULL * v, -FULL - 1, FULL)
    return float(np.abs(got - want).max())


def run_yaml(tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    r = subprocess.run([CBF_RUN, path, "--quiet"], capture_output=True, text=True, timeout=120)
    if r.returncode:
        fail(f"{name}: cbf-run exited {r.returncode}: {r.stdout}{r.stderr}")


CASES = {
    "comb": {"combs": [{"frequency": 53.5e6, "amplitude": 0.05, "phase_x": 0.4, "phase_y": -1.1}]},
    "comb_harmonics": {"combs": [{"frequency": 7.0e6, "amplitude": 0.03, "harmonics": 9}]},
    "impulses": {"impulses": [{"period": 512, "amplitude": 0.5, "offset": 7},
                              {"period": 64, "amplitude": -0.25}]},
    "constants": {"constants": [0.1, -0.2, 0.3, -0.4]},
    "constant_all": {"constants": [0.125]},
    "all": {"tones": [{"frequency": 214e6, "amplitude": 0.1, "phase_y": 0.5}],
            "combs": [{"frequency": 107e6, "amplitude": 0.05, "harmonics": 3}],
            "impulses": [{"period": 256, "amplitude": 0.4, "offset": 100}],
            "constants": [0.05, 0.0, -0.05, 0.02]},
}


def check_models():
    antennas, spc, chunks = 2, 65536, 2
    delays = [0.0, 2.6]
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("compute", "replay"):
            period = 65536 if mode == "replay" else 0
            for name, spec in CASES.items():
                params = {"antennas": antennas, "bits": BITS, "samples_per_chunk": spc,
                          "length": chunks * spc, "noise": 0.0, "tones": [], "delays": delays,
                          "start": 3 * spc, "mode": mode, "period": 65536, **spec}
                path = os.path.join(tmp, f"{mode}-{name}.h5")
                run_yaml(tmp, f"{mode}-{name}", {
                    "engine": {"gpu": "none"},
                    "nodes": {"dsim": {"plugin": "dsim", "params": params},
                              "sink": {"plugin": "filesink", "params": {"path": path}}},
                    "edges": ["dsim.out -> sink.in"]})
                got, _ = samples(path, antennas)
                v = model(spec, antennas, chunks * spc, 3 * spc, FS_HZ, period, delays)
                err = close(got, v)
                if err > 0.5 + 1e-6:
                    fail(f"{mode} {name}: a sample is {err:.3f} LSB from the float64 model")
                if np.abs(v).max() * FULL < 100:
                    fail(f"{mode} {name}: the case makes no signal to speak of")
                print(f"ok: {mode} {name}: every sample within {err:.3f} LSB of the model")


def engine_yaml(mode, spc, length, rate):
    return yaml.safe_dump({
        "engine": {"gpu": "none", "control": "tcp://127.0.0.1:*"},
        "nodes": {"dsim": {"plugin": "dsim", "params": {
                      "antennas": 1, "bits": BITS, "samples_per_chunk": spc, "length": length,
                      "adc_sample_rate": rate, "noise": 0.0, "realtime": True, "mode": mode,
                      "period": spc,
                      "tones": [{"frequency": rate / 64, "amplitude": 0.2, "phase_y": 1.0}]}},
                  "sink": {"plugin": "filesink", "params": {"path": "PATH"}}},
        "edges": ["dsim.out -> sink.in"]})


def dsim_sensors(e):
    rc, reply, err = e.request({"request": "sensors"})
    if rc:
        fail(f"sensors: {err}")
    return reply["sensors"]["nodes"]["dsim"]


def check_request():
    # 64 Ki samples a chunk at 1 MHz: 65.5 ms a chunk, the switch 1.7 s in.
    spc, chunks, rate = 65536, 40, 1e6
    at = 26 * spc + 12345
    new = {"combs": [{"frequency": rate / 128, "amplitude": 0.05, "harmonics": 5}],
           "impulses": [{"period": 1024, "amplitude": 0.3, "offset": 3}],
           "constants": [0.25, -0.125]}
    for mode in ("compute", "replay"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.h5")
            e = Engine(engine_yaml(mode, spc, chunks * spc, rate).replace("PATH", path),
                       os.path.join(tmp, "eng.yaml"))
            try:
                rc, out, err = e.ctl("--json", "signals", f"at={at}", "tones=[]",
                                     "combs=" + json.dumps([rate / 128, 0.05, 5, 0, 0]),
                                     "impulses=[1024, 0.3, 3]", "constants=[0.25, -0.125]",
                                     "period=32768")
                check(rc == 0 and json.loads(out)["at"] == at,
                      f"{mode}: cbf-ctl signals at {at} accepted ({out.strip()}{err.strip()})")
                rc, out, err = e.ctl("signals", "at=0", "constants=[0.5]")
                check(rc == 1 and "already" in (out + err),
                      f"{mode}: a change at a timestamp already produced is refused "
                      f"({(out + err).strip()})")
                rc, out, err = e.ctl("signals", f"at={at + 1}", "constants=[1, 2, 3]")
                check(rc == 1 and "constants has 3 values" in (out + err),
                      f"{mode}: constants neither one nor one per input are refused "
                      f"({(out + err).strip()})")
                rc, out, err = e.ctl("signals", f"at={at + 1}", "impulses=[1024, 0.3]")
                check(rc == 1 and "groups of 3" in (out + err),
                      f"{mode}: impulses that are not whole records are refused ({(out + err).strip()})")
                want_period = 32768 if mode == "replay" else 0
                deadline = time.monotonic() + 30
                while True:
                    s = dsim_sensors(e)
                    if s["counters"]["samples"] > at + spc:
                        break
                    if time.monotonic() > deadline:
                        fail(f"{mode}: dsim did not get past the switch")
                    time.sleep(0.05)
                check(s["gauges"]["period"] == want_period and s["counters"]["signal_changes"] == 1,
                      f"{mode}: after the switch the period gauge says {s['gauges']['period']} "
                      f"and signal_changes {s['counters']['signal_changes']}")
                code = e.proc.wait(timeout=60)
                if code:
                    fail(f"{mode}: engine exited {code}: {''.join(e.log)}")
            finally:
                e.kill()
            got, ts = samples(path, 1)
            if ts[0] != 0 or len(ts) != chunks:
                fail(f"{mode}: timestamps {ts}")
            old_spec = {"tones": [{"frequency": rate / 64, "amplitude": 0.2, "phase_y": 1.0}]}
            old_period = spc if mode == "replay" else 0
            old = model(old_spec, 1, at, 0, rate, old_period, None)
            after = model(new, 1, chunks * spc - at, at, rate, want_period, None)
            e_old, e_new = close(got[:, :at], old), close(got[:, at:], after)
            # The samples either side of the switch against the other signal
            # too, so a switch one sample early or late cannot pass.
            wrong_last = close(got[:, at - 1:at], model(new, 1, 1, at - 1, rate, want_period, None))
            wrong_first = close(got[:, at:at + 1], model(old_spec, 1, 1, at, rate, old_period, None))
            if e_old > 0.5 + 1e-6 or e_new > 0.5 + 1e-6 or wrong_last < 1 or wrong_first < 1:
                fail(f"{mode}: before the switch {e_old:.3f} LSB from the old model, after it "
                     f"{e_new:.3f} from the new (sample at-1 {wrong_last:.1f} from the new, sample "
                     f"at {wrong_first:.1f} from the old)")
            print(f"ok: {mode}: samples [0, {at}) are the old signal, [{at}, {chunks * spc}) the new "
                  f"one (within {max(e_old, e_new):.3f} LSB), switched at exactly {at}")


def main():
    what = sys.argv[1:] or ["models", "request"]
    if "models" in what:
        check_models()
    if "request" in what:
        check_request()
    return 0


if __name__ == "__main__":
    sys.exit(main())
