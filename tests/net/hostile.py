#!/usr/bin/env python3
"""Hostile or broken input at the receiver (spead2 sends digitiser heaps):
  1. one heap with a spoofed timestamp 2^40 samples ahead, among genuine
     ones: it is counted in packets_ahead and dropped; the window does not
     move (before, it emitted every empty chunk up to it, about 2^24 of them,
     and every genuine heap after it was late);
  2. the stream itself jumps, forwards and then back, each time after a
     pause longer than `resync_after`: the window restarts where the stream
     now is, every heap of each stretch lands, and no empty chunks fill the
     gap; the log says so;
  3. a datagram longer than the receiver takes (10 000 bytes) is counted in
     packets_truncated, not passed on as a packet with a wrong payload
     length; a sender asked for packets that large is refused at start;
  4. a stream stop from a socket that sent nothing else is counted in
     stops_ignored and does not end the stream;
  5. one spoofed heap a little inside `max_ahead`, at the L-band rate and
     the real timestamp step: counted in packets_outlier and dropped; the
     window does not move, no genuine heap is late and no chunk but the
     genuine ones is opened (before, it sent every empty chunk up to it and
     the genuine heaps after it came late);
  6. the stream itself jumps ahead within `max_ahead`, without a pause: the
     window follows once `jump_packets` (4) distinct packets agree, the 3
     before held and then placed; the chunks in between go out flagged
     missing, and every heap after the gap is in place.

usage: hostile.py CBF_RUN
"""
import os
import socket
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
    import spead2
    import spead2.send
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/spead2/yaml not importable ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import end_counts, fail, free_port, start_receiver, write_yaml  # noqa: E402

SPC = 65536                 # samples per chunk and pol: 16 heaps
HEAPS = SPC // 4096
FLAVOUR = spead2.Flavour(4, 64, 48, 0)


class Digitiser:
    def __init__(self, port):
        self.ig = spead2.send.ItemGroup(flavour=FLAVOUR)
        for name, iid in [("timestamp", 0x1600), ("digitiser_id", 0x3101), ("digitiser_status", 0x3102)]:
            self.ig.add_item(iid, name, name, shape=(), format=[("u", 48)])
        self.ig.add_item(0x3300, "raw_data", "packed samples", shape=(5120,), dtype=np.uint8)
        self.stream = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)],
                                            spead2.send.StreamConfig(max_packet_size=5192, rate=200e6))
        self.rng = np.random.default_rng(3)
        self.sent = {}      # chunk -> [pol][heap] payloads

    def heap(self, ts, pol):
        payload = self.rng.integers(0, 256, 5120, dtype=np.uint8)
        self.ig["timestamp"].value, self.ig["digitiser_id"].value = ts, pol
        self.ig["digitiser_status"].value = 0
        self.ig["raw_data"].value = payload
        h = self.ig.get_heap(descriptors="none", data="all")
        h.repeat_pointers = True
        self.stream.send_heap(h)
        return payload

    def chunks(self, first, n):
        for c in range(first, first + n):
            got = [[None] * HEAPS for _ in range(2)]
            for k in range(HEAPS):
                for pol in range(2):
                    got[pol][k] = self.heap(c * SPC + k * 4096, pol)
            self.sent[c] = got

    def stop(self):
        self.stream.send_heap(self.ig.get_end())


def start(cbf_run, tmp, name, port, path, **extra):
    params = {"address": f"127.0.0.1:{port}", "samples_per_chunk": SPC, "chunks_in_flight": 2,
              "buffers": 4, "idle_timeout": 20, **extra}
    doc = {"engine": {"gpu": "none"},
           "nodes": {"recv": {"plugin": "receiver", "params": params},
                     "sink": {"plugin": "filesink", "params": {"path": path}}},
           "edges": ["recv.out -> sink.in"]}
    return start_receiver(cbf_run, tmp, name, port, doc)


def finish(name, proc, path):
    counts, log = end_counts(name, proc)
    f = h5py.File(path)["recv"]
    return f["timestamp"][()], f["present"][()], f["data"][()], counts, log


def check_chunks(name, dig, ts, present, data):
    """The chunks out, in the order their heaps were sent, hold what was sent."""
    want = list(dig.sent)
    if list(ts) != [c * SPC for c in want]:
        fail(f"{name}: chunk timestamps {list(ts)}, expected {[c * SPC for c in want]}")
    if not present.all():
        fail(f"{name}: {int((present == 0).sum())} heaps flagged missing")
    for i, c in enumerate(want):
        for pol in range(2):
            got = data[i, 0, pol].reshape(HEAPS, 5120)
            if not all(np.array_equal(got[k], dig.sent[c][pol][k]) for k in range(HEAPS)):
                fail(f"{name}: chunk {c} pol {pol} differs from what was sent")


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        port, path = free_port(), os.path.join(tmp, "spoof.h5")
        proc = start(cbf_run, tmp, "spoof", port, path)
        dig = Digitiser(port)
        dig.chunks(0, 3)
        dig.heap(1 << 40, 0)          # spoofed: not recorded as sent
        dig.chunks(3, 3)
        dig.stop()
        ts, present, data, counts, log = finish("spoof", proc, path)
        check_chunks("spoofed timestamp", dig, ts, present, data)
        if counts.get("packets_ahead") != 1 or counts.get("heaps_late"):
            fail(f"spoofed timestamp: expected 1 packet ahead and none late: {counts}")
        print(f"ok: a heap 2^40 samples ahead counted (packets_ahead=1) and dropped; {len(ts)} genuine chunks whole")

        port, path = free_port(), os.path.join(tmp, "jump.h5")
        proc = start(cbf_run, tmp, "jump", port, path, resync_after=0.2)
        dig = Digitiser(port)
        dig.chunks(0, 3)
        # The stream stops for 1 s (5 x resync_after) and comes back elsewhere.
        time.sleep(1.0)
        dig.chunks(1 << 20, 3)
        time.sleep(1.0)
        dig.chunks(100, 3)
        dig.stop()
        ts, present, data, counts, log = finish("jump", proc, path)
        restarts = log.count("the window restarts there")
        if restarts != 2:
            fail(f"stream jumps: expected 2 restarts in the log, got {restarts}: {log}")
        # Chunks leave in the order the stream visited them.
        order = [0, 1, 2, 1 << 20, (1 << 20) + 1, (1 << 20) + 2, 100, 101, 102]
        if list(ts) != [c * SPC for c in order]:
            fail(f"stream jumps: chunk timestamps {list(ts)}, expected {[c * SPC for c in order]}")
        check_chunks("stream jumps", dig, ts, present, data)
        if counts.get("packets_ahead") or counts.get("heaps_late"):
            fail(f"stream jumps: nothing should be dropped: {counts}")
        print("ok: the stream jumped forwards 2^20 chunks and back; the window restarted twice, every heap landed")

        port, path = free_port(), os.path.join(tmp, "long.h5")
        proc = start(cbf_run, tmp, "long", port, path)
        dig = Digitiser(port)
        dig.chunks(0, 1)
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"\x53\x04\x02\x06" + bytes(9996), ("127.0.0.1", port))
        dig.chunks(1, 1)
        dig.stop()
        ts, present, data, counts, log = finish("long", proc, path)
        check_chunks("a long datagram", dig, ts, present, data)
        if counts.get("packets_truncated") != 1 or counts.get("malformed_length"):
            fail(f"a 10000-byte datagram: expected packets_truncated=1 and no malformed_length: {counts}")
        doc = {"engine": {"gpu": "none"},
               "nodes": {"dsim": {"plugin": "dsim", "params": {"length": 65536}},
                         "send": {"plugin": "sender", "params": {"destinations": f"127.0.0.1:{port}",
                                                                 "packet_size": 9300}}},
               "edges": ["dsim.out -> send.in"]}
        yml = os.path.join(tmp, "big.yaml")
        write_yaml(yml, doc)
        r = subprocess.run([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
        if r.returncode == 0 or "packet_size" not in r.stdout:
            fail(f"a sender with packet_size 9300 should be refused naming it: {r.stdout}")
        print("ok: a 10000-byte datagram counted in packets_truncated; packet_size 9300 refused at start")

        port, path = free_port(), os.path.join(tmp, "stop.h5")
        proc = start(cbf_run, tmp, "stop", port, path)
        dig = Digitiser(port)
        dig.chunks(0, 2)
        spoof = Digitiser(port)       # another socket: another source port
        spoof.stop()
        dig.chunks(2, 2)
        dig.stop()
        ts, present, data, counts, log = finish("stop", proc, path)
        check_chunks("a spoofed stop", dig, ts, present, data)
        if counts.get("stops_ignored") != 1:
            fail(f"a stop from a silent socket: expected stops_ignored=1: {counts}")
        print("ok: a stream stop from a socket that sent nothing else ignored and counted; the stream ran on")

        # max_ahead 0.01 s at 1712 MHz is 261 chunks of 65536 samples.
        port, path = free_port(), os.path.join(tmp, "inside.h5")
        proc = start(cbf_run, tmp, "inside", port, path, max_ahead=0.01, resync_after=60)
        dig = Digitiser(port)
        dig.chunks(0, 3)
        dig.heap((2 + 250) * SPC, 0)     # spoofed, 250 chunks past the newest open one
        dig.chunks(3, 3)
        dig.stop()
        ts, present, data, counts, log = finish("inside", proc, path)
        check_chunks("a spoofed heap inside max_ahead", dig, ts, present, data)
        if counts.get("packets_outlier") != 1 or counts.get("heaps_late") or counts.get("chunks") != 6:
            fail(f"a spoofed heap inside max_ahead: expected packets_outlier=1, no heap late, chunks=6: {counts}")
        print(f"ok: one heap 250 chunks ahead (inside max_ahead) counted (packets_outlier=1) and dropped; "
              f"chunks={counts['chunks']}, heaps_late=0, every genuine heap whole")

        port, path = free_port(), os.path.join(tmp, "gap.h5")
        proc = start(cbf_run, tmp, "gap", port, path, max_ahead=0.01, resync_after=60)
        dig = Digitiser(port)
        dig.chunks(0, 3)
        dig.chunks(103, 3)               # a real gap of 100 chunks, no pause
        dig.stop()
        ts, present, data, counts, log = finish("gap", proc, path)
        if list(ts) != [c * SPC for c in range(106)]:
            fail(f"a real gap: chunk timestamps {list(ts)[:8]}... ({len(ts)}), expected chunks 0 to 105")
        flags = present.reshape(len(ts), 2, HEAPS)
        want = np.zeros_like(flags)
        want[[0, 1, 2, 103, 104, 105]] = 1
        if not np.array_equal(flags, want) or counts.get("packets_outlier") or counts.get("heaps_late"):
            fail(f"a real gap: flags differ from the expected at chunks "
                 f"{sorted(set(np.argwhere(flags != want)[:, 0].tolist()))}; {counts}")
        for c in [0, 1, 2, 103, 104, 105]:   # chunk c is the c-th out
            for pol in range(2):
                got = data[c, 0, pol].reshape(HEAPS, 5120)
                if not all(np.array_equal(got[k], dig.sent[c][pol][k]) for k in range(HEAPS) if want[c, pol, k]):
                    fail(f"a real gap: chunk {c} pol {pol} differs from what was sent")
        if "the window follows" not in log:
            fail(f"a real gap: the log does not say the window followed the stream: {log}")
        print("ok: a real gap of 100 chunks followed after 4 agreeing packets (held, then placed: none "
              "lost); the chunks between flagged missing, every heap after in place")
    return 0


if __name__ == "__main__":
    sys.exit(main())
