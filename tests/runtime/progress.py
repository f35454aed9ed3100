#!/usr/bin/env python3
"""cbf-run's progress line is drawn only for the terminal's foreground job:
cbf-run on a pseudo-terminal that is its controlling terminal (the
foreground, as when typed at a shell) redraws its status line;
on the same kind of terminal but not its controlling one (as `cbf-run &`:
the job is not the terminal's foreground) it draws nothing, so it cannot
write over another command's output.

usage: progress.py CBF_RUN PIPELINES_DIR
"""
import fcntl
import os
import select
import subprocess
import sys
import termios
import time


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cbf_run, pipeline, controlling):
    master, slave = os.openpty()

    def child():
        os.setsid()                       # a new session, no terminal yet
        if controlling:                   # the pty becomes its terminal, its group the foreground
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([cbf_run, pipeline, "--set", "dsim.length=0", "--set", "engine.gpu=none"],
                            stdin=slave, stdout=slave, stderr=slave, preexec_fn=child)
    os.close(slave)
    out = b""
    deadline = time.monotonic() + 4.0     # a status line comes every 0.5 s
    while time.monotonic() < deadline:
        r, _, _ = select.select([master], [], [], 0.2)
        if r:
            try:
                out += os.read(master, 65536)
            except OSError:
                break
    proc.terminate()
    proc.wait(timeout=60)
    os.close(master)
    return out


def main():
    cbf_run, pipelines = sys.argv[1], sys.argv[2]
    pipeline = os.path.join(pipelines, "dsim-replay-discard.yaml")
    fg = run(cbf_run, pipeline, True)
    # The status line is redrawn as "\r<line>\033[K" (the terminal itself
    # turns every "\n" into "\r\n", so "\r" alone proves nothing).
    if b"\033[K" not in fg or b"dsim" not in fg.split(b"\033[K", 1)[0]:
        fail(f"in the foreground: no progress line redrawn in 4 s: {fg[-600:]!r}")
    print("ok: in the foreground of its terminal, cbf-run redraws its progress line")
    bg = run(cbf_run, pipeline, False)
    if b"\033[K" in bg:
        fail(f"not the terminal's foreground: the progress line was drawn: {bg[-600:]!r}")
    print("ok: not the terminal's foreground job: no progress line drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
