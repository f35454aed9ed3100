#!/usr/bin/env python3
"""The sender sends a buffer's packets when the buffer is done, not when
its packet batch fills.

A realtime dsim at 8192 samples/s sends one 4096-sample chunk (one packet
per pol) every half second to a UDP socket here; the sender's batch is 32
packets. The first data packet must arrive while the dsim has produced
fewer than 16 chunks (32 packets): without the flush at each buffer's end
it sat in the queue until 32 had gathered (16 chunks, 8 s here; at 0.5 s
visibility dumps of one packet each, 16 s of latency). Read from the dsim's
own `samples` counter when the packet arrives, so the check does not
depend on how fast the machine is.

usage: flush.py"""
import os
import socket
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from ctl_util import Engine, check, engine_yaml, fail  # noqa: E402

RATE, SPC = 8192, 4096


def main():
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.settimeout(30)
    port = rx.getsockname()[1]
    text = engine_yaml([
        "dsim: {plugin: dsim, params: {antennas: 1, samples_per_chunk: %d, length: 0, realtime: true, "
        "noise: 0.05}}" % SPC,
        "send: {plugin: sender, params: {destinations: \"127.0.0.1:%d\", descriptor_interval: 0, batch: 32}}"
        % port], ["dsim.out -> send.in"], ["sync_time: 1700000000", f"adc_sample_rate: {RATE}"])
    with tempfile.TemporaryDirectory() as tmp:
        e = Engine(text, os.path.join(tmp, "flush.yaml"))
        try:
            while True:
                try:
                    pkt = rx.recv(65536)
                except socket.timeout:
                    fail("no data packet within 30 s")
                # SPEAD items: a data packet carries the timestamp item (0x1600)
                n_items = int.from_bytes(pkt[6:8], "big")
                ids = {int.from_bytes(pkt[8 + 8 * i:10 + 8 * i], "big") & 0x7fff for i in range(n_items)}
                if 0x1600 in ids:
                    break
            rc, reply, err = e.request({"request": "sensors"})
            if rc:
                fail(f"sensors request: {err}")
            samples = reply["sensors"]["nodes"]["dsim"]["counters"]["samples"]
            check(samples < 16 * SPC, f"the first data packet came while the dsim had made {samples // SPC} "
                  "chunks (fewer than the 16 that fill a batch of 32 packets)")
            check(e.shutdown() == 0, "engine drained and exited 0")
        finally:
            e.kill()


if __name__ == "__main__":
    main()
