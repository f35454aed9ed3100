#!/usr/bin/env python3
"""A chunk whose heaps are all in leaves the receiver at once.

The receiver (digitiser stream, one antenna, chunks_in_flight 4) is sent
every heap of chunk 0 and then nothing: with release_complete (the default)
the chunk leaves while the window is still open on chunks 1 to 3, so its
`chunks` counter reaches 1 and `flags_missing` stays 0 with no later packet
to push it out; with release_complete false it stays in the window (chunks
0) until the stream stop drains it. The stop then ends both runs, and the
counters say every packet was accepted once: none late, none duplicate.
At a slow sample rate (katgpucbf's qualification suite at 1/1024 of
L-band) the window's chunks are seconds each: holding four of them is the
latency this removes.

usage: release.py CBF_RUN"""
import os
import socket
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from accounting import spead  # noqa: E402
from ctl_util import Engine, check, engine_yaml, fail  # noqa: E402
from loopback import bound, free_port  # noqa: E402

SPC = 65536        # samples per chunk
HEAP = 4096        # samples per digitiser heap
DEADLINE = 30.0


def counters(e):
    rc, reply, err = e.request({"request": "sensors"})
    if rc != 0:
        fail(f"sensors request: {err}")
    return reply["sensors"]["nodes"]["recv"]["counters"]


def run(tmp, release):
    port = free_port()
    text = engine_yaml([
        "recv: {plugin: receiver, params: {address: \"127.0.0.1:%d\", antennas: 1, samples_per_chunk: %d, "
        "chunks_in_flight: 4, buffers: 8, release_complete: %s}}" % (port, SPC, "true" if release else "false"),
        "sink: {plugin: discard}"], ["recv.out -> sink.in"])
    e = Engine(text, os.path.join(tmp, f"release-{release}.yaml"), stdout=subprocess.PIPE)
    try:
        deadline = time.monotonic() + DEADLINE
        while not bound(port):
            if time.monotonic() > deadline:
                fail("the receiver did not bind its port")
            time.sleep(0.01)
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        cnt = 1
        for k in range(SPC // HEAP):
            for did in range(2):
                items = [(0x1600, True, k * HEAP), (0x3101, True, did), (0x3102, True, 0), (0x3300, False, 0)]
                s.sendto(spead(cnt, HEAP * 10 // 8, 0, bytes(HEAP * 10 // 8), items), ("127.0.0.1", port))
                cnt += 1
        # every packet taken: then the chunk has left, or is held
        while counters(e).get("packets_accepted", 0) < 2 * SPC // HEAP:
            if time.monotonic() > deadline:
                fail(f"the receiver took {counters(e).get('packets_accepted')} of {2 * SPC // HEAP} packets")
            time.sleep(0.01)
        if release:
            while counters(e)["chunks"] < 1:
                if time.monotonic() > deadline:
                    fail("release_complete: the complete chunk did not leave while its window was open")
                time.sleep(0.01)
        c = counters(e)
        check(c["chunks"] == (1 if release else 0) and c["flags_missing"] == 0,
              f"release_complete {release}: chunks {c['chunks']} with the window still open")
        s.sendto(spead(cnt, 0, 0, b"", ctrl=2), ("127.0.0.1", port))   # stream stop
        s.close()
        if e.shutdown() != 0:
            fail("the receiver did not drain and exit 0")
        # the end-of-run table (stdout)
        c = {k: int(v) for k, v in (w.split("=", 1) for w in e.proc.stdout.read().split() if "=" in w)
             if v.isdigit()}
        check(c["chunks"] == 1 and c["packets_accepted"] == 2 * SPC // HEAP and c["packets_late"] == 0 and
              c["packets_duplicate"] == 0, f"release_complete {release}: one chunk, every packet accepted once")
    finally:
        e.kill()


def main():
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        run(tmp, True)
        run(tmp, False)


if __name__ == "__main__":
    main()
