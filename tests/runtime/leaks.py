#!/usr/bin/env python3
"""No memory is lost: cbf-run under valgrind's memcheck, CPU path, on
pipelines/feng-wideband.yaml (dsim, pfb with FFTW's planner, fft_post,
HDF5 filesink): once to its end, and once stopped by SIGINT while it runs
(sent once the output file exists). Each run must report 0 bytes
definitely lost and no memory error, and drain with exit 0.

usage: leaks.py CBF_RUN PIPELINES_DIR
"""
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cbf_run, pipeline, tmp, name, length, interrupt):
    out = os.path.join(tmp, name + ".h5")
    log = os.path.join(tmp, name + ".vg")
    # keep-debuginfo: the frames of unloaded plugins and their libraries keep
    # their names, so the one suppression (cuFFT's own constructor) can match
    # by library and nothing else hides behind "???".
    supp = os.path.join(os.path.dirname(os.path.abspath(__file__)), "valgrind.supp")
    cmd = ["valgrind", "--leak-check=full", "--errors-for-leak-kinds=definite", "--error-exitcode=99",
           "--keep-debuginfo=yes", "--suppressions=" + supp, "--log-file=" + log, cbf_run, pipeline, "--quiet", "--set", "engine.gpu=none",
           "--set", f"dsim.length={length}", "--set", f"sink.path={out}", "--set", "sink.overwrite=true"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if interrupt:
        deadline = time.monotonic() + 240
        while not os.path.exists(out):
            if proc.poll() is not None or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if proc.poll() is None:
            proc.send_signal(signal.SIGINT)
    text = proc.communicate(timeout=600)[0]
    with open(log) as f:
        report = f.read()
    lost = [line for line in report.splitlines() if "definitely lost:" in line]
    if proc.returncode != 0:
        fail(f"{name}: exit {proc.returncode} (99: valgrind found errors):\n{text}\n{report[-4000:]}")
    if not lost or "definitely lost: 0 bytes" not in lost[0] or "ERROR SUMMARY: 0 errors" not in report:
        fail(f"{name}: {lost} \n{report[-4000:]}")
    print(f"ok: {name}: {lost[0].split('==')[-1].strip()}, no memory errors, exit 0")


def main():
    if not shutil.which("valgrind"):
        print("skipped: valgrind is not installed (scripts/setup.sh installs it for the tests)")
        return 77
    cbf_run, pipelines = sys.argv[1], sys.argv[2]
    pipeline = os.path.join(pipelines, "feng-wideband.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        run(cbf_run, pipeline, tmp, "to-the-end", 2 * 1048576, False)
        run(cbf_run, pipeline, tmp, "sigint", 0, True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
