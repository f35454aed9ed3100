#!/usr/bin/env python3
"""An installed cbf starts wherever it is installed: `meson install` into a
staging folder (DESTDIR, so neither the compiled-in prefix nor ldconfig
can help), then the installed cbf-inspect lists the installed plugins and
the installed cbf-run runs a pipeline with them, with nothing in
LD_LIBRARY_PATH that leads to the build tree and no CBF_PLUGIN_PATH.

The install holds what the README's commands need besides the programs
(README.md, "Installing"), and it works from there:
  - every file of pipelines/ in PREFIX/share/cbf/pipelines, the same bytes;
  - the user scripts and their modules in PREFIX/share/cbf/scripts
    (executable where they are run), cbf-plot and cbf-describe in bin/ as
    links that resolve there, and no lab script (device-*.sh);
  - README.md and every docs/*.md in PREFIX/share/doc/cbf;
  - cbf.pc in PREFIX/LIBDIR/pkgconfig, the folder docs/plugins.md tells
    PKG_CONFIG_PATH to name (tests/example builds a plugin against it);
  - from a folder outside both trees, the installed cbf-run runs the
    installed demo pipeline, bin/cbf-describe reads its file and the
    installed xeng-phases.py prints its table with its default pipeline
    (the installed one), and the installed run-array runs the whole array
    with the installed cbf-run and pipelines (no --build).

usage: install.py BUILD_DIR [SOURCE_DIR]
"""
import filecmp
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

# The user scripts an install carries (scripts/meson.build), and those run.
SCRIPTS = ["cbf-plot", "cbf-describe", "xeng-phases.py", "feng-channels.py", "run-array",
           "cbf_h5.py", "cbf_array.py", "slurm/cbf-array.sbatch"]
RUN = {"cbf-plot", "cbf-describe", "xeng-phases.py", "feng-channels.py", "run-array", "slurm/cbf-array.sbatch"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def find(root, name):
    for d, _, files in os.walk(root):
        if name in files:
            return os.path.join(d, name)
    return None


def options(build):
    with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
        return {o["name"]: o["value"] for o in json.load(f)}


def check_files(src, root, opt):
    """The pipelines, scripts, docs and cbf.pc where README.md says."""
    share = os.path.join(root, opt["datadir"])
    pipes, want = os.path.join(share, "cbf", "pipelines"), os.path.join(src, "pipelines")
    for d, _, files in os.walk(want):
        for f in files:
            rel = os.path.relpath(os.path.join(d, f), want)
            got = os.path.join(pipes, rel)
            if not os.path.isfile(got) or not filecmp.cmp(got, os.path.join(want, rel), shallow=False):
                fail(f"pipelines/{rel} is not installed as {got}")
    scripts = os.path.join(share, "cbf", "scripts")
    for s in SCRIPTS:
        p = os.path.join(scripts, s)
        if not os.path.isfile(p) or (s in RUN) != os.access(p, os.X_OK):
            fail(f"scripts/{s}: not installed as {p}" + (" (executable)" if s in RUN else ""))
    lab = [os.path.basename(p) for p in glob.glob(os.path.join(scripts, "device-*"))]
    if lab:
        fail(f"lab scripts installed: {lab}")
    for s in ("cbf-plot", "cbf-describe"):
        link = os.path.join(root, opt["bindir"], s)
        if not os.path.islink(link) or os.path.realpath(link) != os.path.realpath(os.path.join(scripts, s)):
            fail(f"{link} is not a link to {os.path.join(scripts, s)}")
    docs = os.path.join(share, "doc", "cbf")
    for rel in ["README.md"] + [os.path.relpath(p, src) for p in glob.glob(os.path.join(src, "docs", "*.md"))]:
        if not os.path.isfile(os.path.join(docs, rel)):
            fail(f"{rel} is not installed in {docs}")
    pc = os.path.join(root, opt["libdir"], "pkgconfig", "cbf.pc")
    if not os.path.isfile(pc):
        fail(f"no cbf.pc at {pc} (PREFIX/LIBDIR/pkgconfig, docs/plugins.md)")
    return scripts


def check_scripts(root, opt, scripts, env, work):
    """The installed scripts run from the install, outside both trees."""
    run, pipes = os.path.join(root, opt["bindir"], "cbf-run"), os.path.join(scripts, "..", "pipelines")
    r = subprocess.run([run, os.path.join(pipes, "demo.yaml"), "--quiet", "--set", "dsim.length=8388608"],
                       capture_output=True, text=True, env=env, cwd=work, timeout=120)
    if r.returncode or not os.path.isfile(os.path.join(work, "demo.h5")):
        fail(f"installed cbf-run on the installed demo.yaml: exit {r.returncode}: {r.stdout}{r.stderr}")
    r = subprocess.run([os.path.join(root, opt["bindir"], "cbf-describe"), "demo.h5"],
                       capture_output=True, text=True, env=env, cwd=work, timeout=60)
    if r.returncode or "/reduce: X-engine visibilities" not in r.stdout:
        fail(f"installed bin/cbf-describe demo.h5: exit {r.returncode}: {r.stdout}{r.stderr}")
    r = subprocess.run([os.path.join(scripts, "xeng-phases.py"), "demo.h5"],
                       capture_output=True, text=True, env=env, cwd=work, timeout=60)
    if r.returncode or "| 0 | 1 |" not in r.stdout:
        fail(f"installed xeng-phases.py demo.h5 (its default pipeline): exit {r.returncode}: {r.stdout}{r.stderr}")
    r = subprocess.run([os.path.join(scripts, "run-array"), "--length", "4194304", "--out", "array"],
                       capture_output=True, text=True, env=env, cwd=work, timeout=300)
    if r.returncode or "8 processes drained" not in r.stdout or "beam 0:" not in r.stdout:
        fail(f"installed run-array: exit {r.returncode}: {r.stdout}{r.stderr}")


def scripts_python_lacks():
    """The first module of those the user scripts import that their
    interpreter lacks, or None."""
    for mod in ("numpy", "h5py", "yaml", "matplotlib"):
        r = subprocess.run(["/usr/bin/python3", "-c", f"import {mod}"], capture_output=True, timeout=60)
        if r.returncode:
            return mod
    return None


def main():
    build = sys.argv[1]
    src = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    meson = shutil.which("meson")
    if not meson:
        print("skipped: meson is not on PATH")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        stage = os.path.join(tmp, "stage")
        r = subprocess.run([meson, "install", "-C", build, "--destdir", stage, "--no-rebuild", "--quiet"],
                           capture_output=True, text=True, timeout=300)
        if r.returncode:
            fail(f"meson install: {r.stdout}{r.stderr}")
        opt = options(build)
        root = stage + opt["prefix"]
        scripts = check_files(src, root, opt)
        inspect, run = find(stage, "cbf-inspect"), find(stage, "cbf-run")
        if not inspect or not run:
            fail("cbf-inspect or cbf-run not installed")
        # Nothing may point back at the build tree (meson's test environment
        # puts its libcbf on LD_LIBRARY_PATH); other entries, such as a
        # bundle of the system's libraries, stay.
        env = {k: v for k, v in os.environ.items() if k != "CBF_PLUGIN_PATH"}
        real_build = os.path.realpath(build)
        keep = [d for d in env.get("LD_LIBRARY_PATH", "").split(":")
                if d and not os.path.realpath(d).startswith(real_build)]
        env["LD_LIBRARY_PATH"] = ":".join(keep)
        r = subprocess.run([inspect], capture_output=True, text=True, env=env, timeout=60)
        lines = [l for l in r.stdout.splitlines() if l.startswith("dsim ")]
        if r.returncode or not lines or stage not in lines[0]:
            fail(f"installed cbf-inspect: exit {r.returncode}, dsim not listed from {stage}: {r.stdout}{r.stderr}")
        pipeline = os.path.join(tmp, "p.yaml")
        with open(pipeline, "w") as f:
            f.write("engine: {gpu: none}\nnodes:\n  dsim: {plugin: dsim, params: {length: 1048576}}\n"
                    "  sink: {plugin: discard}\nedges:\n  - dsim.out -> sink.in\n")
        r = subprocess.run([run, pipeline], capture_output=True, text=True, env=env, timeout=60)
        if r.returncode or "drained" not in r.stdout:
            fail(f"installed cbf-run: exit {r.returncode}: {r.stdout}{r.stderr}")
        # The user scripts run Debian's /usr/bin/python3 (their first line),
        # with the packages scripts/setup.sh installs; without them (a GPU
        # machine's image) they cannot run here, which is the machine's
        # lack, not the install's.
        missing = scripts_python_lacks()
        if missing:
            print(f"skipped: the install's files are in place and cbf-run runs from it, but the user "
                  f"scripts' /usr/bin/python3 cannot import {missing} (scripts/setup.sh installs it), "
                  f"so they are not run")
            return 77
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        check_scripts(root, opt, scripts, env, work)
        print(f"ok: installed under {stage}: cbf-inspect lists its plugins, cbf-run drains a pipeline; "
              f"pipelines, scripts, docs and cbf.pc in place; the installed demo, cbf-describe, "
              f"xeng-phases.py and run-array run from the install")
    return 0


if __name__ == "__main__":
    sys.exit(main())
