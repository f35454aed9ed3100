#!/usr/bin/env python3
"""pipelines/xbeng.yaml as a user runs it (shortened): the demo array's
X-engine batches feed the correlator and the beamformer at once. At the
tone's channel the beam steered with the dsim's delays keeps the coherent
sum, and the unsteered beam keeps |sum_a exp(-i theta_a)|^2 / 16 of it,
theta_a = 2 pi d_a k / step the tone's phase at antenna a (d_a = 1.25 a
samples, k = 300, step = 2048): 0.117. The visibilities in the same file
are those of pipelines/demo.yaml (one copy of the data feeds both). The
/beams group states the beamformer's dither (attributes `dither` and
`dither_key`, as an F-engine's group states fft_post's).

usage: xbeng.py CBF_RUN PIPELINES_DIR
"""
import cmath
import math
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


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    cbf_run, pipelines = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        out, ref = os.path.join(tmp, "xbeng.h5"), os.path.join(tmp, "demo.h5")
        short = ["--set", "dsim.length=4194304"]
        key = ["--set", "beams.dither_key=4242"]
        for yml, path, extra in (("xbeng.yaml", out, key), ("demo.yaml", ref, [])):
            subprocess.run([cbf_run, os.path.join(pipelines, yml), "--quiet", "--set", f"sink.path={path}"]
                           + short + extra, check=True, timeout=300)
        f = h5py.File(out)
        at = f["beams"].attrs
        if at.get("dither") != 1 or at.get("dither_key") != 4242:
            fail(f"/beams: dither {at.get('dither')}, dither_key {at.get('dither_key')}; want 1 and 4242")
        if not np.array_equal(f["reduce"]["data"][()], h5py.File(ref)["reduce"]["data"][()]):
            fail("the visibilities beside the beams differ from pipelines/demo.yaml's")
        b = f["beams"]["data"][()].astype(np.float64)          # [buf][batch][beam][channel][spectrum][2]
        power = (b ** 2).sum(-1).mean(axis=(0, 1, 4))           # [beam][channel]
        k, step = 300, 2048
        s = sum(cmath.exp(-2j * math.pi * 1.25 * a * k / step) for a in range(4))
        want = abs(s) ** 2 / 16
        steered, unsteered = power[0, k], power[1, k]
        off = power[0, np.r_[0:k - 5, k + 6:power.shape[1]]].mean()
        if int(np.argmax(power[0])) != k or steered < 1000 * off:
            fail(f"steered beam: peak at channel {int(np.argmax(power[0]))}, {steered:.1f} against {off:.3f} off the tone")
        # 5%: the dsim's noise in that channel is 1/2000 of the tone's power,
        # and 8-bit rounding of a ~95-count value moves it by under 1%.
        if abs(unsteered / steered - want) > 0.05 * want:
            fail(f"unsteered/steered power at channel {k}: {unsteered / steered:.4f}, expected {want:.4f}")
        print(f"ok: steered beam {steered:.0f} at channel {k} ({10 * math.log10(steered / off):.0f} dB above the "
              f"floor); unsteered {unsteered:.0f} = {unsteered / steered:.4f} of it (expected {want:.4f}); "
              f"visibilities equal demo.yaml's; /beams says dither 1, dither_key 4242")
    return 0


if __name__ == "__main__":
    sys.exit(main())
