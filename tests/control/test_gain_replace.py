#!/usr/bin/env python3
"""Correcting timed gain changes on a running F-engine, as an operator
would with cbf-ctl, seen in an HDF5 capture of the spectra and the gains
in force (dsim paced in real time at 1 Msample/s, so the requests land
ahead of the data):

1. a change far in the future (a typing error), then the right change at
   T1: it replaces the far one (`replaced: 1`) and takes effect;
2. a wrong change at T3, then a pol-1-only change at T2 < T3: it drops the
   wrong one, and its pol 0 is the table before it (T1's), not T3's;
3. a wrong change at T4, cancelled (`cbf-ctl gain --cancel --at T4`);
4. `cbf-ctl gain` with no values prints the gains in force, and with
   `--at` those a pending change will set.

The file must record exactly the table at start, T1's and T2's, each from
the first spectrum at or after its `at`; the tone's channel divided by the
gain recorded for each spectrum is constant over the capture (a dropped
change that took effect, or a change one spectrum early or late, leaves a
factor of 2 or more at that spectrum). Exit 77 without h5py/numpy."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import Engine, check, importable  # noqa: E402

h5py, np = importable("h5py", "numpy")

# check_gain_record's F-engine (a tone in channel K, dsim paced at 1
# Msample/s, spectra, gains and delays to one file), its wait and its
# check of the recorded tables.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "filesink"))
from check_gain_record import K, SPH, STEP, YAML, check_tables, written  # noqa: E402

BUF = SPH * STEP                          # samples per output buffer


def gain(e, *args):
    """cbf-ctl --json gain ARGS on node post: the reply."""
    rc, out, err = e.ctl("--json", "gain", "--node", "post", *args)
    check(rc == 0, f"cbf-ctl gain {' '.join(args)}: {out.strip()}{err.strip()}")
    return json.loads(out)


def shown(e, *args):
    """cbf-ctl gain ARGS (text): its pol lines."""
    rc, out, err = e.ctl("gain", "--node", "post", *args)
    check(rc == 0, f"cbf-ctl gain {' '.join(args)}: {out.strip()}{err.strip()}")
    return [line for line in out.splitlines() if line.startswith("pol")]


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-gain-replace-") as tmp:
        path = os.path.join(tmp, "f.h5")
        e = Engine(YAML % path, os.path.join(tmp, "engine.yaml"))
        try:
            written(e, 2)
            check(shown(e) == ["pol0: 0.02+0j", "pol1: 0.02+0j"],
                  "cbf-ctl gain with no values prints the YAML's gains, in force")
            nxt = gain(e)["at"]
            # Two seconds of stream ahead: every request below lands in time.
            t1 = (nxt // BUF + 60) * BUF + 17 * STEP + 5     # between spectra, mid-buffer
            t2 = t1 + 6 * BUF + 3 * STEP
            t3 = t1 + 12 * BUF
            t4 = t2 + 3 * BUF + 9 * STEP
            far = nxt + 600 * 10**6                          # ten minutes on at 1 Msample/s
            r = gain(e, "--at", str(far), "0.5")
            check(r["pending"] == 1 and r["replaced"] == 0, "a far-future change is pending")
            r = gain(e, "--at", str(t1), "0.04")
            check(r["at"] == t1 and r["replaced"] == 1 and r["pending"] == 1,
                  f"the right change at {t1} replaces it ({r})")
            r = gain(e, "--at", str(t3), "0.08")
            check(r["pending"] == 2, "a wrong change at T3 is pending behind it")
            r = gain(e, "--pol", "1", "--at", str(t2), "0.01")
            check(r["replaced"] == 1 and r["pending"] == 2,
                  f"pol 1 alone at T2 < T3 drops the change at T3 ({r})")
            check(shown(e, "--at", str(t3)) == ["pol0: 0.04+0j", "pol1: 0.01+0j"],
                  "the gains at T3 are T2's: pol 0 from T1, not from the dropped change")
            r = gain(e, "--at", str(t4), "0.3")
            check(r["pending"] == 3, "a wrong change at T4")
            rc, out, err = e.ctl("gain", "--node", "post", "--cancel", "--at", str(t4))
            check(rc == 0 and "replaced: 1" in out and "pending: 2" in out,
                  f"cbf-ctl gain --cancel --at T4 drops it ({out.strip()}{err.strip()})")
            # Buffers written count the three gain tables too.
            written(e, t4 // BUF + 8)
            check(shown(e) == ["pol0: 0.04+0j", "pol1: 0.01+0j"],
                  "once T2 has passed, cbf-ctl gain prints T2's gains in force")
            check(e.shutdown() == 0, "engine drained and exited 0")
        finally:
            e.kill()
        with h5py.File(path) as f:
            g = check_tables(f, t1, t2, ", none of the replaced or cancelled ones")[0]
            data = g["data"][()].astype(np.float64)           # [buf][batch][chan][spec][pol][re_im]
            t0 = g["timestamp"][()]
        x = data[:, :, K]                                     # [buf][batch][spec][pol][re_im]
        amp = np.hypot(x[..., 0], x[..., 1]).reshape(-1, 2)   # [spectrum][pol], time order
        spectra_ts = (t0[:, None] + np.arange(data.shape[1] * SPH)[None, :] * STEP).reshape(-1)
        # The gain each spectrum must have used, from the requests alone:
        # the first spectrum at or after a change's `at` uses it.
        expect = np.where(spectra_ts[:, None] >= t2, [0.04, 0.01],
                          np.where(spectra_ts[:, None] >= t1, [0.04, 0.04], [0.02, 0.02]))
        check(spectra_ts[-1] > t4 + 2 * BUF, "the capture runs past every change asked")
        # The first buffer's window reaches before the stream: skip it.
        # Quantisation (+-0.5 on 18 or more) and the noise stay within 10%
        # of the tone; a wrong spectrum at a boundary is off by 2 or more.
        norm = amp[SPH:] / expect[SPH:]
        ratio = norm / np.median(norm, axis=0)
        check(np.all(np.abs(ratio - 1) < 0.1),
              f"|x| / the gain asked for each spectrum is constant (range {ratio.min():.3f} .. "
              f"{ratio.max():.3f}, {len(ratio)} spectra)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
