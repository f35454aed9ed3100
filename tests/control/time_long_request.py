#!/usr/bin/env python3
"""How long an 8 MiB gain request takes, end to end (not a test: it prints
times; docs/control.md quotes them). A 65536-channel F-engine, dsim paced at
1 Msample/s so the pipeline costs little; the request: 131072 values
written with 60 digits, just under the 8 MiB cap, sent three times over
ZeroMQ (cbf-ctl raw -) and three times over katcp (?gain-all, one complex
value per channel).

    CBF_BUILD_ROOT=build-cpu python3 tests/control/time_long_request.py"""
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import CBF_CTL, Engine  # noqa: E402

N = 65536
CAP = 8 << 20

YAML = f"""
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
nodes:
  dsim:
    plugin: dsim
    params: {{antennas: 1, adc_sample_rate: 1e6, samples_per_chunk: 524288, length: 0, realtime: true,
             noise: 0.01}}
  pfb:
    plugin: pfb
    params: {{channels: {N}, taps: 4, spectra_per_buffer: 4}}
  post:
    plugin: fft_post
    params: {{spectra_per_heap: 4}}
  sink:
    plugin: discard
edges:
  - dsim.out -> pfb.in
  - pfb.out -> post.in
  - post.out -> sink.in
"""


def padded(v, width):
    """v in scientific notation with its mantissa padded to `width` characters."""
    mant, exp = ("%.17e" % v).split("e")
    return mant + "0" * max(0, width - len(mant)) + "e" + exp


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-long-") as tmp:
        e = Engine(YAML, os.path.join(tmp, "engine.yaml"))
        try:
            head = '{"request": "gain", "node": "post", "values": ['
            width = (CAP - len(head) - 8) // (2 * N) - 6
            body = head + ", ".join(padded(random.uniform(-1, 1), width) for _ in range(2 * N)) + "]}"
            path = os.path.join(tmp, "gain.json")
            with open(path, "w") as f:
                f.write(body)
            for _ in range(3):
                with open(path) as f:
                    t = time.monotonic()
                    r = subprocess.run([CBF_CTL, "-e", e.control, "-t", "60", "raw", "-"], stdin=f,
                                       capture_output=True, text=True)
                print("zeromq %d bytes: %.3f s (exit %d)" % (len(body), time.monotonic() - t, r.returncode))
            width = (CAP - 32) // N // 2 - 8
            line = ("?gain-all post " + " ".join(
                padded(random.uniform(-1, 1), width) + "+" + padded(random.uniform(0, 1), width) + "j"
                for _ in range(N)) + "\n").encode()
            for _ in range(3):
                with socket.create_connection(e.katcp) as s:
                    t = time.monotonic()
                    s.sendall(line)
                    buf = b""
                    while b"!gain-all" not in buf:
                        buf += s.recv(65536)
                    reply = buf.split(b"!gain-all")[1].split(b"\n")[0][:20]
                print("katcp %d bytes: %.3f s (!gain-all%s)" % (len(line), time.monotonic() - t, reply.decode()))
            e.shutdown()
        finally:
            e.kill()


if __name__ == "__main__":
    main()
