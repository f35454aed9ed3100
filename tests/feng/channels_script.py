"""Runs pipelines/feng-wideband.yaml on the CPU (shortened) and reads its
HDF5 with scripts/feng-channels.py, as the README tells a user to: both dsim
tones must be the two strongest channels of each polarisation, in the
channels the pipeline's comment promises (1000 and 3000 of 4096), and the
other channels at the README's figure. Then the same for the narrowband
outputs of pipelines/feng-wide-narrow.yaml, which must not clip: no value
saturated (fft_post's counts, in the file's `saturated`) and none at the
8-bit limit."""
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy
    import yaml  # noqa: F401
except ImportError as e:
    print(f"skipped: h5py/numpy/yaml not importable ({e})")
    sys.exit(77)

src, build = os.environ["CBF_SOURCE_ROOT"], os.environ["CBF_BUILD_ROOT"]
with tempfile.TemporaryDirectory() as tmp:
    h5 = os.path.join(tmp, "fw.h5")
    run = subprocess.run([os.path.join(build, "tools", "cbf-run"),
                          os.path.join(src, "pipelines", "feng-wideband.yaml"),
                          "--set", "dsim.length=4194304", "--set", f"sink.path={h5}"],
                         capture_output=True, text=True, timeout=240)
    if run.returncode != 0:
        sys.exit(f"cbf-run failed ({run.returncode}):\n{run.stderr}")
    out = subprocess.run([sys.executable, os.path.join(src, "scripts", "feng-channels.py"), h5,
                          "--top", "2", "--pipeline",
                          os.path.join(src, "pipelines", "feng-wideband.yaml")],
                         capture_output=True, text=True, timeout=60)
    print(out.stdout, out.stderr)
    if out.returncode != 0:
        sys.exit("feng-channels.py failed")
    rows = [ln.split("|") for ln in out.stdout.splitlines() if ln.strip().startswith("| ") and
            ln.split("|")[1].strip().isdigit()]
    tops = {}
    for r in rows:
        tops.setdefault(int(r[1]), []).append((int(r[2]), float(r[4])))
    for pol in (0, 1):
        chans = [c for c, _ in tops.get(pol, [])]
        if chans != [1000, 3000]:
            sys.exit(f"pol {pol}: strongest channels {chans}, expected [1000, 3000]")
        # Tone amplitudes 0.2 and 0.1 of full scale: the first about twice the second.
        ratio = tops[pol][0][1] / tops[pol][1][1]
        if not 1.9 < ratio < 2.1:
            sys.exit(f"pol {pol}: tone amplitude ratio {ratio:.3f}, expected about 2")
    for tone in ("channel 1000.00", "channel 3000.00"):
        if tone not in out.stdout:
            sys.exit(f"the tone list lacks '{tone}'")
    # The README states what the other channels show (with the default dither).
    with open(os.path.join(src, "README.md")) as f:
        said = re.search(r"counts there, ([0-9.]+) rms\s+elsewhere", f.read())
    got = re.search(r"other channels: rms ([0-9.]+) counts", out.stdout)
    if not said or not got:
        sys.exit("README's figure for the other channels, or the script's, not found")
    if abs(float(got.group(1)) - float(said.group(1))) > 0.1 * float(said.group(1)):
        sys.exit(f"other channels: rms {got.group(1)} counts, README says {said.group(1)}")

# The narrowband plan: pipelines/feng-wide-narrow.yaml promises its first
# tone in channel 3048 of narrow1 and its second in channel 312 of narrow2.
with tempfile.TemporaryDirectory() as tmp:
    pipe = os.path.join(src, "pipelines", "feng-wide-narrow.yaml")
    sets = ["--set", "dsim.length=16777216"]
    for s in ("wide", "narrow1", "narrow2"):
        sets += ["--set", f"sink_{s}.path={os.path.join(tmp, s + '.h5')}"]
    run = subprocess.run([os.path.join(build, "tools", "cbf-run"), pipe] + sets,
                         capture_output=True, text=True, timeout=240)
    if run.returncode != 0:
        sys.exit(f"cbf-run feng-wide-narrow failed ({run.returncode}):\n{run.stderr}")
    for name, chan in (("narrow1", 3048), ("narrow2", 312)):
        out = subprocess.run([sys.executable, os.path.join(src, "scripts", "feng-channels.py"),
                              os.path.join(tmp, name + ".h5"), "--top", "1", "--pipeline", pipe],
                             capture_output=True, text=True, timeout=60)
        print(out.stdout, out.stderr)
        if out.returncode != 0:
            sys.exit(f"feng-channels.py {name} failed")
        if f"-> channel {chan}.00" not in out.stdout:
            sys.exit(f"{name}: the plan does not put a tone in channel {chan}")
        for pol in (0, 1):
            if f"| {pol} | {chan} |" not in out.stdout:
                sys.exit(f"{name} pol {pol}: strongest channel is not {chan}")
        # At the pipeline's gains nothing clips (the ddc's sqrt(S) is in them).
        with h5py.File(os.path.join(tmp, name + ".h5"), "r") as f:
            g = f["post_" + name]
            sat, peak = int(g["saturated"][:].sum()), int(numpy.abs(g["data"][:]).max())
        print(f"{name}: {sat} values saturated, largest |part| {peak}")
        if sat or peak >= 127:
            sys.exit(f"{name}: the output clips ({sat} values saturated, largest |part| {peak})")
print("ok")
