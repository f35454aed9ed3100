"""scripts/xeng-phases.py and scripts/cbf-plot print the same amplitude for
one baseline of one file, and both say which: the mean visibility per dump.
(xeng-phases printed the sum over the dumps, cbf-plot the mean, unlabelled:
3 times apart on pipelines/demo.yaml.) Runs demo.yaml (3 dumps)."""
import os
import re
import subprocess
import sys
import tempfile

try:
    import h5py  # noqa: F401
    import matplotlib  # noqa: F401
    import numpy  # noqa: F401
    import yaml  # noqa: F401
except ImportError as e:
    print(f"skipped: h5py/matplotlib/numpy/yaml not importable ({e})")
    sys.exit(77)

src, build = os.environ["CBF_SOURCE_ROOT"], os.environ["CBF_BUILD_ROOT"]
pipe = os.path.join(src, "pipelines", "demo.yaml")


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=240)
    if r.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout


with tempfile.TemporaryDirectory() as tmp:
    h5 = os.path.join(tmp, "demo.h5")
    run([os.path.join(build, "tools", "cbf-run"), pipe, "--set", f"sink.path={h5}"])
    table = run([sys.executable, os.path.join(src, "scripts", "xeng-phases.py"), h5,
                 "--pipeline", pipe])
    plot = run([sys.executable, os.path.join(src, "scripts", "cbf-plot"), h5, "--out", tmp,
                "--channel", "300", "--baselines", "6"])
print(table)
print(plot)
if "amplitude (aa, mean per dump)" not in table:
    sys.exit("xeng-phases.py does not say its amplitude is the mean per dump")
dumps = re.search(r"over (\d+) dumps", table)
if not dumps or int(dumps[1]) < 2:
    sys.exit("xeng-phases.py does not say over how many dumps (2 or more tell sum from mean)")
xp = {(int(m[1]), int(m[2])): float(m[3])
      for m in re.finditer(r"^\| (\d+) \| (\d+) \| (\S+) \|", table, re.M)}
cp = {(int(m[1]), int(m[2])): float(m[3])
      for m in re.finditer(r"ant(\d+)p0 x ant(\d+)p0 at channel 300 .*: mean per dump, "
                           r"amplitude (\S+), phase", plot)}
if not cp:
    sys.exit("cbf-plot printed no baseline of pol 0 at channel 300 labelled 'mean per dump'")
for bl, amp in cp.items():
    if bl not in xp:
        sys.exit(f"xeng-phases.py has no row for baseline {bl}")
    # both print 4 significant digits
    if abs(xp[bl] - amp) > 1e-3 * amp:
        sys.exit(f"baseline {bl}: xeng-phases.py prints {xp[bl]:.4g}, cbf-plot {amp:.4g}")
print(f"ok: {len(cp)} baselines, the same amplitude from both scripts")
