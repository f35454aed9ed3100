#!/usr/bin/env python3
"""An installed cbf starts wherever it is installed: `meson install` into a
staging folder (DESTDIR, so neither the compiled-in prefix nor ldconfig
can help), then the installed cbf-inspect lists the installed plugins and
the installed cbf-run runs a pipeline with them, with nothing in
LD_LIBRARY_PATH that leads to the build tree and no CBF_PLUGIN_PATH.

usage: install.py BUILD_DIR
"""
import os
import shutil
import subprocess
import sys
import tempfile


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def find(root, name):
    for d, _, files in os.walk(root):
        if name in files:
            return os.path.join(d, name)
    return None


def main():
    build = sys.argv[1]
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
        print(f"ok: installed under {stage}: cbf-inspect lists its plugins, cbf-run drains a pipeline")
    return 0


if __name__ == "__main__":
    sys.exit(main())
