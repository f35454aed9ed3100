#!/usr/bin/env python3
"""scripts/cbf-plot on files from shipped pipelines (shortened with --set)
and a small beamformer pipeline: every PNG it names exists, is a PNG of a
sensible size, and the numbers it prints are the ones the simulators
predict (so a picture of the wrong channel, baseline or sign fails, not
only a crash):
- feng-wideband.yaml: the peak of every input is the 208.984375 MHz tone,
  and feng-wide-narrow.yaml's narrowband peak its 327.060546875 MHz tone;
- demo.yaml: the strongest channel is the tone's (300), and the phase of
  baseline (a1, a2) there is 360 x 1.25 (a2 - a1) x 300 / 2048 degrees;
- xeng.yaml (fsim, delays 1.5 a samples, antenna 3 missing one dump): the
  phase at a chosen channel k is 360 x 1.5 (a2 - a1) k / 128 degrees, and
  the dumps with missing data are left out of the baselines they touch;
  the same file cut to channels 32-63 (first_channel 32) gives the same
  phase at channel 40;
- fsim -> beamformer + correlator: beam powers and accumulator amplitudes
  from fsim's signal and noise levels;
- dsim-to-hdf5.yaml: sample rms from dsim's tones and noise;
- a HDF5 file filesink did not write, and a file that is not HDF5: exit 2
  with a message saying so.
Exit 77 (skipped) without h5py, numpy or matplotlib, or before cbf-run is
built."""
import math
import os
import re
import struct
import subprocess
import sys
import tempfile

try:
    import matplotlib  # noqa: F401  (cbf-plot needs it)
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)
# Skips without h5py, numpy or cbf-run; runs pipelines, counts failures.
from check_meaning import ROOT, check, failures, h5py, run  # noqa: E402

PLOT = os.path.join(ROOT, "scripts", "cbf-plot")


def png_ok(path):
    """A PNG signature, an IHDR of a picture between 300 x 200 and 2000 x
    2000 pixels, and 5 kB .. 400 kB of file."""
    with open(path, "rb") as f:
        head = f.read(24)
    size = os.path.getsize(path)
    if head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return f"{path}: not a PNG"
    w, h = struct.unpack(">II", head[16:24])
    if not (300 <= w <= 2000 and 200 <= h <= 2000 and 5000 <= size <= 400000):
        return f"{path}: {w} x {h} pixels, {size} bytes"
    return None


def plot(path, out, *args):
    """cbf-plot's output: {png file: [detail lines]}, every PNG checked."""
    r = subprocess.run([sys.executable, PLOT, path, "--out", out, *args],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, f"cbf-plot {path} {args}: exit {r.returncode}\n{r.stderr}")
    pngs, last = {}, None
    for line in r.stdout.splitlines():
        if line.startswith("  ") and last:
            pngs[last].append(line.strip())
        elif ".png: " in line:
            last = line.split(": ", 1)[0]
            pngs[last] = []
    for p in pngs:
        check(os.path.dirname(p) == out and os.path.exists(p), f"{p} named but not in {out}")
        if os.path.exists(p):
            bad = png_ok(p)
            check(bad is None, bad)
    print(r.stdout, end="")
    return pngs


def one(pngs, suffix):
    hits = [p for p in pngs if p.endswith(suffix)]
    check(len(hits) == 1, f"want one PNG ending {suffix}, have {sorted(pngs)}")
    return pngs[hits[0]] if hits else []


def wrap(deg):
    return (deg + 180.0) % 360.0 - 180.0


def phases(lines):
    """{(first input, second input): (channel, amplitude, phase deg, dumps)}"""
    out = {}
    for line in lines:
        m = re.match(r"(\S+) x (\S+) at channel (\d+) .*amplitude (\S+), phase (\S+) deg "
                     r"\((\d+) dumps?\)", line)
        if m:
            out[(m[1], m[2])] = (int(m[3]), float(m[4]), float(m[5]), int(m[6]))
    return out


def check_phases(got, delays, channels, k, tol, what):
    """Phase of x(a1) conj(x(a2)) for a common signal delayed d_a samples:
    360 (d2 - d1) k / (2 channels) degrees (docs/formats.md, "Delay and
    phase")."""
    check(len(got) >= 3, f"{what}: {len(got)} baselines printed")
    for (x, y), (c, _, deg, _) in got.items():
        a1, a2 = int(x[3]), int(y[3])
        want = wrap(360.0 * (delays[a2] - delays[a1]) * k / (2 * channels))
        check(c == k and abs(wrap(deg - want)) < tol,
              f"{what}: {x} x {y} channel {c} phase {deg}, want channel {k} phase {want:.2f}")


def feng(work, out):
    path = os.path.join(work, "wide.h5")
    run("feng-wideband.yaml",
        [f"sink.path={path}", "dsim.length=4194304"], work)
    lines = one(plot(path, out), "wide-fft_post-spectrum.png")
    width = 856e6 / 4096
    check(len(lines) == 2, f"feng: {lines}")
    for line in lines:
        m = re.search(r"peak channel (\d+) \((\S+) MHz\)", line)
        check(m and int(m[1]) == 1000 and abs(float(m[2]) * 1e6 - 208984375.0) < width / 2,
              f"feng: {line} (the tone is at 208.984375 MHz, channel 1000)")


def narrow(work, out):
    """feng-wide-narrow.yaml's first narrowband output (centre 300.9375 MHz,
    decimation 8, 4096 channels): its peak is the 327.060546875 MHz tone,
    its frequencies from the ddc's centre."""
    sets = ["dsim.length=4194304", f"sink_wide.path={work}/w.h5"]
    for n in (1, 2):
        sets += [f"sink_narrow{n}.path={work}/n{n}.h5", f"pfb_narrow{n}.spectra_per_buffer=32",
                 f"post_narrow{n}.spectra_per_heap=32"]
    run("feng-wide-narrow.yaml", sets, work)
    lines = one(plot(f"{work}/n1.h5", out), "n1-post_narrow1-spectrum.png")
    width = 1712e6 / 2 / 8 / 4096
    check(len(lines) == 2, f"narrowband: {lines}")
    for line in lines:
        m = re.search(r"peak channel \d+ \((\S+) MHz\)", line)
        check(m and abs(float(m[1]) * 1e6 - 327060546.875) < width / 2,
              f"narrowband: {line} (the tone is at 327.060546875 MHz)")


def demo(work, out):
    """The README's picture comes from this file (full length there)."""
    path = os.path.join(work, "demo.h5")
    run("demo.yaml", [f"sink.path={path}", "dsim.length=8388608"], work)
    pngs = plot(path, out)
    got = phases(one(pngs, "demo-reduce-baselines.png"))
    one(pngs, "demo-reduce-matrix-ch300.png")
    # Coherence is 1.000 (tone 10x the noise, thousands of spectra): the
    # phase is good to far better than 1 degree; a wrong sign, baseline or
    # channel is tens of degrees off.
    check_phases(got, [0, 1.25, 2.5, 3.75], 1024, 300, 1.0, "demo")
    pngs = plot(path, out, "--channel", "all", "--baselines", "2")
    check(len(phases(one(pngs, "demo-reduce-baselines.png"))) == 0, "demo: numbers at no channel")
    one(pngs, "demo-reduce-matrix-mean.png")


def xeng(work, out):
    path = os.path.join(work, "xeng.h5")
    run("xeng.yaml", [f"sink.path={path}"], work)
    got = phases(one(plot(path, out, "--channel", "40", "--baselines", "6"),
                     "xeng-reduce-baselines.png"))
    # fsim: coherence 400 / (400 + 100) = 0.8 over >= 10 dumps of 1024
    # spectra: a phase error of about 0.2 degree rms; 2 degrees is 10 sigma.
    check_phases(got, [0, 1.5, 3, 4.5], 64, 40, 2.0, "xeng")
    for (x, y), (_, _, _, n) in got.items():
        # 12 dumps: dump 0 partly seen by all, dump 3 missing antenna 3.
        want = 10 if "ant3" in x + y else 11
        check(n == want, f"xeng: {x} x {y} averaged over {n} dumps, want {want}")
    # The file of an X-engine holding channels 32-63 of the 64, as a receiver-
    # fed one writes it: channel 40 is index 8 there, and must be read so.
    upper = os.path.join(work, "upper.h5")
    with h5py.File(path) as src, h5py.File(upper, "w") as dst:
        src.copy("reduce", dst)
        g = dst["reduce"]
        for name in ("data", "channel_frequency"):
            d, a = g[name][()], dict(g[name].attrs)
            del g[name]
            g[name] = d[:, 32:] if name == "data" else d[32:]
            g[name].attrs.update(a)
        g.attrs.update({"first_channel": 32, "channel_count": 32})
    got = phases(one(plot(upper, out, "--channel", "40", "--baselines", "6"),
                     "upper-reduce-baselines.png"))
    check_phases(got, [0, 1.5, 3, 4.5], 64, 40, 2.0, "xeng channels 32-63")
    r = subprocess.run([sys.executable, PLOT, upper, "--out", out, "--channel", "31"],
                       capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "holds channels 32 .. 63, not 31" in r.stderr,
          f"cbf-plot --channel 31 of channels 32-63: exit {r.returncode}, {r.stderr!r}")


BEAMS = """
engine: {name: plot_beams, gpu: none}
nodes:
  fsim: {plugin: fsim, params: {antennas: 4, channels: 64, length: 64}}
  beam:
    plugin: beamformer
    params:
      beams: [{pol: 0}, {pol: 0, quant_gain: 0.25}]
      weights: [1, 0, 0, 0,  1, 1, 1, 1]
  corr: {plugin: correlator}
  sink: {plugin: filesink, params: {path: beams.h5, overwrite: true}}
edges:
  - fsim.out -> beam.in
  - fsim.out -> corr.in
  - fsim.out -> sink.in
  - beam.out -> sink.in
  - corr.out -> sink.in
"""


def beams(work, out):
    """fsim (no delays): per component a common signal of rms 20 and noise of
    rms 10 per input, so each input's power is 2 (20^2 + 10^2) = 1000
    (30.00 dB); beam 0 is antenna 0 alone (1000), beam 1 the sum of 4 at
    gain 1/4: 2 ((4 x 20)^2 + 4 x 10^2) / 16 = 850, plus rounding and
    dither (2 x 2 / 12), 29.30 dB. ~10^6 values a beam: 0.05 dB is many
    sigma. A cross-correlation sums 1024 spectra a dump of 2 x 20^2."""
    yaml = os.path.join(work, "beams.yaml")
    with open(yaml, "w") as f:
        f.write(BEAMS)
    run(yaml, [], work)     # an absolute path: os.path.join keeps it
    pngs = plot(os.path.join(work, "beams.h5"), out, "--channel", "10")
    power = {}
    for line in one(pngs, "beams-beam-beams.png") + one(pngs, "beams-fsim-spectrum.png"):
        m = re.match(r"(beam \d+|\S+): .*mean (\S+) dB", line)
        if m:
            power[m[1]] = float(m[2])
    for name, want in [("beam 0", 10 * math.log10(1000)), ("beam 1", 10 * math.log10(850.33)),
                       ("ant0p0", 30.0), ("ant3p1", 30.0)]:
        check(name in power and abs(power[name] - want) < 0.05,
              f"beams: {name} power {power.get(name)} dB, want {want:.2f}")
    got = phases(one(pngs, "beams-corr-baselines.png"))
    check_phases(got, [0, 0, 0, 0], 64, 10, 2.0, "accumulators")
    for key, (_, amp, _, n) in got.items():
        # 16 dumps of 1024 spectra: relative error of the mean ~1%.
        check(n == 16 and abs(amp / 819200 - 1) < 0.05, f"accumulators: {key} amplitude {amp}")
    one(pngs, "beams-corr-matrix-ch10.png")


def samples(work, out):
    """dsim-to-hdf5.yaml: 10 bits (full scale 511), tones of 0.2 and 0.05,
    noise 0.05 and common noise 0.02 of full scale: rms 511 x sqrt(0.2^2 / 2
    + 0.05^2 / 2 + 0.05^2 + 0.02^2) = 79.41 (rounding adds 1/12 to the
    power); 1% is many sigma over 2^20 samples (the tones' periods divide
    it)."""
    path = os.path.join(work, "dsim.h5")
    run("dsim-to-hdf5.yaml",
        [f"sink.path={path}", "dsim.length=2097152"], work)
    lines = one(plot(path, out), "dsim-dsim-samples.png")
    want = 511 * math.sqrt(0.2**2 / 2 + 0.05**2 / 2 + 0.05**2 + 0.02**2)
    check(len(lines) == 4, f"samples: {lines}")
    for line in lines:
        m = re.search(r"rms (\S+),", line)
        check(m and abs(float(m[1]) / want - 1) < 0.01, f"samples: {line}, want rms {want:.2f}")


def errors(work, out):
    plain = os.path.join(work, "plain.h5")
    with h5py.File(plain, "w") as f:
        f["x"] = [1, 2, 3]
        f.create_group("g")["data"] = [1]
    text = os.path.join(work, "text.h5")
    with open(text, "w") as f:
        f.write("not hdf5\n")
    for path, says in [(plain, "is this a cbf filesink file?"), (text, "not a readable HDF5 file")]:
        r = subprocess.run([sys.executable, PLOT, path, "--out", out], capture_output=True,
                           text=True, timeout=60)
        check(r.returncode == 2 and says in r.stderr and "Traceback" not in r.stderr,
              f"cbf-plot {os.path.basename(path)}: exit {r.returncode}, {r.stderr!r}")


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-plot-") as work:
        out = os.path.join(work, "png")
        feng(work, out)
        narrow(work, out)
        demo(work, out)
        xeng(work, out)
        beams(work, out)
        samples(work, out)
        errors(work, out)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("ok: every picture exists and its printed numbers are the simulators'")
    return 0


if __name__ == "__main__":
    sys.exit(main())
