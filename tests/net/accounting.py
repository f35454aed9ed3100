#!/usr/bin/env python3
"""Every packet the receiver takes is counted once, under one reason.

A crafted mix of SPEAD packets goes to the receiver over loopback UDP, each
packet made for one reason: genuine heaps placed packet by packet (items in
every packet, or in the first packet only), heaps put together by the
assembler (an extra item before the data), heaps that do not fit the
stream (misaligned timestamp, feng_id or digitiser_id beyond the antennas,
no items at all; on both paths, and the later packets of such heaps that
carry no items), malformed packets of each group, a packet again (its heap
complete), late packets, a packet far beyond max_ahead, a lone packet just
inside it (an outlier), a heap left incomplete in the assembler, a
descriptor, a spoofed stream stop, a datagram too long, and the stream's
own stop. Then, from the receiver's end-of-run counters:

    sum of the per-packet reasons == packets
    packets + packets_dropped_kernel == packets sent

and every reason holds exactly the packets sent for it. Run for both
streams that place packets: feng (an X-engine's input: F-engine heaps of
three packets, feng_id) and digitiser (an F-engine's input: one packet a
heap, with drop_rate to exercise packets_dropped_test).

usage: accounting.py CBF_RUN
"""
import os
import socket
import struct
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import end_counts, fail, free_port, start_receiver  # noqa: E402

# The receiver's per-packet reasons (docs/network.md, "Counting packets").
REASONS = ["packets_accepted", "packets_control", "packets_dropped_test", "packets_late",
           "packets_duplicate", "packets_ahead", "packets_outlier", "packets_bad",
           "packets_incomplete", "packets_truncated", "packets_stopped", "packets_other_destination",
           "stops_ignored", "malformed_foreign", "malformed_header", "malformed_length",
           "malformed_heap_size"]


def spead(heap_cnt, heap_size, offset, payload, items=(), magic=0x53, payload_len=None, ctrl=None):
    """One SPEAD-64-48 packet: items are (id, immediate, value)."""
    ptrs = [(0x0001, True, heap_cnt), (0x0002, True, heap_size), (0x0003, True, offset),
            (0x0004, True, len(payload) if payload_len is None else payload_len)]
    if ctrl is not None:
        ptrs.append((0x0006, True, ctrl))
    ptrs += list(items)
    head = struct.pack(">BBBBHH", magic, 4, 2, 6, 0, len(ptrs))
    body = b"".join(struct.pack(">Q", (1 << 63 if imm else 0) | (iid << 48) | (val & ((1 << 48) - 1)))
                    for iid, imm, val in ptrs)
    return head + body + payload


class Mix:
    """Packets in the order sent, each with the counter it must land in."""

    def __init__(self):
        self.packets = []     # (bytes, reason, from the spoofing socket)
        self.cnt = 1000

    def add(self, pkt, reason, spoof=False):
        self.packets.append((pkt, reason, spoof))

    def next_cnt(self):
        self.cnt += 1
        return self.cnt

    def common(self):
        """What every stream's mix holds besides its own heaps."""
        self.add(b"\x53\x04", "malformed_header")                                  # short
        self.add(spead(self.next_cnt(), 8, 0, bytes(8), magic=0x54), "malformed_foreign")
        self.add(spead(self.next_cnt(), 64, 0, bytes(8), payload_len=16), "malformed_length")
        self.add(spead(self.next_cnt(), 1 << 30, 0, bytes(8)), "malformed_heap_size")
        self.add(spead(self.next_cnt(), 16, 0, bytes(16), [(0x0005, False, 0)]), "packets_control")
        self.add(b"\x53\x04\x02\x06" + bytes(9996), "packets_truncated")
        self.add(spead(self.next_cnt(), 0, 0, b"", ctrl=2), "stops_ignored", spoof=True)
        self.add(spead(self.next_cnt(), 64, 0, bytes(64)), "packets_bad")          # no items at all

    def send(self, port):
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, \
                socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as spoofer:
            for i, (pkt, _, spoof) in enumerate(self.packets):
                (spoofer if spoof else s).sendto(pkt, ("127.0.0.1", port))
                if i % 32 == 31:
                    time.sleep(0.002)   # a pace the socket buffer takes whole, not a sync
            s.sendto(spead(self.next_cnt(), 0, 0, b"", ctrl=2), ("127.0.0.1", port))
        self.add(b"", "packets_control")   # the stop, counted once it has been sent


# ---- feng: F-engine heaps into an X-engine ---------------------------------
ANTS, CH, SPECTRA, BATCHES = 2, 8, 48, 4
SPB = 2 * CH
STEP = SPECTRA * SPB                 # timestamp step of one heap
CHUNK = BATCHES * STEP               # of one chunk
PIECE = CH * SPECTRA * 4             # heap bytes: three packets of 512


def feng_items(ts, fid, data_at=0):
    return [(0x1600, True, ts), (0x4101, True, fid), (0x4103, True, 0), (0x4300, False, data_at)]


def feng_heap(mix, ts, fid, reason, how="direct", send=3):
    """One heap of three packets; how: direct (items in each), first
    (items in the first only), assembler (an 8-byte item before the data),
    split (one item in each packet: no packet says where the heap goes,
    the heap the assembler makes does)."""
    cnt = mix.next_cnt()
    if how == "split":
        payload = bytes(PIECE)
        its = [[(0x1600, True, ts), (0x4300, False, 0)], [(0x4101, True, fid)], [(0x4103, True, 0)]]
        for k in range(send):
            mix.add(spead(cnt, PIECE, 512 * k, payload[512 * k:512 * (k + 1)], its[k]), reason)
        return cnt, None, payload
    if how == "assembler":
        items = [(0x4500, False, 0)] + feng_items(ts, fid, data_at=8)
        payload = bytes(8) + bytes(range(256)) * (PIECE // 256)
        cuts = [(0, 520), (520, 1032), (1032, 1544)]
    else:
        items = feng_items(ts, fid)
        payload = bytes(range(256)) * (PIECE // 256)
        cuts = [(0, 512), (512, 1024), (1024, 1536)]
    for k, (lo, hi) in enumerate(cuts[:send]):
        its = items if how != "first" or k == 0 else []
        mix.add(spead(cnt, len(payload), lo, payload[lo:hi], its), reason)
    return cnt, items, payload


def feng_mix():
    mix = Mix()
    mix.common()
    for c in range(6):
        for b in range(BATCHES):
            ts = c * CHUNK + b * STEP
            for fid in range(ANTS):
                slot = (c, b, fid)
                if slot in [(1, 0, 0), (2, 1, 1)]:
                    feng_heap(mix, ts, fid, "packets_accepted", how="first")
                elif slot == (2, 2, 0):
                    feng_heap(mix, ts, fid, "packets_accepted", how="split")
                elif slot in [(1, 2, 1), (3, 0, 0)]:
                    cnt, items, payload = feng_heap(mix, ts, fid, "packets_accepted", how="assembler")
                    if slot == (3, 0, 0):   # again, once delivered: the assembler says late
                        mix.add(spead(cnt, len(payload), 520, payload[520:1032], items), "packets_late")
                elif slot == (4, 0, 1):     # two packets of three: never completes
                    feng_heap(mix, ts, fid, "packets_incomplete", how="assembler", send=2)
                else:
                    feng_heap(mix, ts, fid, "packets_accepted")
                if slot == (0, 3, 1):       # the heap complete: one of its packets again
                    mix.add(mix.packets[-1][0], "packets_duplicate")
            if c == 1 and b == 1:
                # Heaps that do not fit, every packet of them bad.
                for k in range(3):
                    feng_heap(mix, ts + 1 + k, 0, "packets_bad")          # misaligned
                    feng_heap(mix, ts, ANTS + k, "packets_bad")           # feng_id beyond the antennas
                feng_heap(mix, ts, ANTS, "packets_bad", how="first")      # later packets: no items
                feng_heap(mix, ts, ANTS + 3, "packets_bad", how="split")
            if c == 2 and b == 3:
                mix.add(spead(mix.next_cnt(), PIECE, 0, bytes(512), feng_items(STEP << 32, 0)),
                        "packets_ahead")
                mix.add(spead(mix.next_cnt(), PIECE, 0, bytes(512), feng_items((2 + 1000) * CHUNK, 0)),
                        "packets_outlier")
            if c == 3 and b == 0:
                # Chunk 3 open: chunks 0 and 1 have left; a heap of chunk 0 is late.
                payload = bytes(PIECE)
                for lo in (0, 512):
                    mix.add(spead(mix.next_cnt(), PIECE, lo, payload[lo:lo + 512], feng_items(STEP, 0)),
                            "packets_late")
    params = {"stream": "feng", "antennas": ANTS, "channels": CH, "spectra_per_heap": SPECTRA,
              "batches": BATCHES, "chunks_in_flight": 2, "buffers": 4,
              # only the window moves chunks on, so a packet again for a
              # complete heap is a duplicate wherever it falls (release.py
              # has complete chunks leave at once)
              "release_complete": False}
    return mix, params, "recv.batches -> sink.in"


# ---- digitiser: digitiser heaps into an F-engine ---------------------------
SPC = 65536


def dig_packet(mix, ts, did, reason):
    items = [(0x1600, True, ts), (0x3101, True, did), (0x3102, True, 0), (0x3300, False, 0)]
    mix.add(spead(mix.next_cnt(), 5120, 0, bytes(5120), items), reason)


def dig_mix():
    mix = Mix()
    mix.common()
    for c in range(4):
        for k in range(SPC // 4096):
            for did in range(4):   # two antennas, two pols
                dig_packet(mix, c * SPC + k * 4096, did, "packets_accepted")
        if c == 1:
            for k in range(3):
                dig_packet(mix, c * SPC + 4096 * k + 7, 0, "packets_bad")   # misaligned
                dig_packet(mix, c * SPC, 4 + k, "packets_bad")              # antenna 2 of 2
            dig_packet(mix, (c + 1 + 1000) * SPC, 0, "packets_outlier")
    params = {"antennas": 2, "samples_per_chunk": SPC, "chunks_in_flight": 2, "buffers": 4,
              "drop_rate": 0.05, "drop_seed": 7, "release_complete": False}
    return mix, params, "recv.out -> sink.in"


def run(cbf_run, tmp, name, mix, params, edge):
    port = free_port()
    # resync_after long: a sender stalled a second on a loaded machine must
    # not look like a stream that moved (that has its own tests).
    params = dict(params, address=f"127.0.0.1:{port}", idle_timeout=20, stops=1, resync_after=60)
    doc = {"engine": {"gpu": "none"},
           "nodes": {"recv": {"plugin": "receiver", "params": params}, "sink": {"plugin": "discard"}},
           "edges": [edge]}
    proc = start_receiver(cbf_run, tmp, name, port, doc)
    mix.send(port)
    return end_counts(name, proc)


def check(name, mix, counts, log):
    sent = len(mix.packets)
    got = {r: counts.get(r, 0) for r in REASONS}
    total = sum(got.values())
    if "packets" not in counts:
        fail(f"{name}: no packets counter in the log: {log}")
    if counts["packets"] + counts.get("packets_dropped_kernel", 0) != sent:
        fail(f"{name}: {sent} packets sent, packets={counts['packets']} "
             f"packets_dropped_kernel={counts.get('packets_dropped_kernel', 0)}")
    if total != counts["packets"]:
        fail(f"{name}: the reasons sum to {total}, packets={counts['packets']} "
             f"({counts['packets'] - total} counted nowhere): {got}")
    want = {r: 0 for r in REASONS}
    for _, reason, _ in mix.packets:
        want[reason] += 1
    if counts.get("packets_dropped_kernel"):
        print(f"note: {name}: the kernel dropped {counts['packets_dropped_kernel']} packets; "
              "the sum holds, the reason by reason check needs every packet")
        return
    # drop_rate draws among the data packets (SPEAD-valid, not control): any
    # of them may be in packets_dropped_test instead of its own reason.
    data = ["packets_accepted", "packets_late", "packets_duplicate", "packets_ahead", "packets_outlier",
            "packets_bad", "packets_incomplete"]
    short = {r: want[r] - got[r] for r in data}
    wrong = {r: (got[r], want[r]) for r in REASONS
             if (r in data and not 0 <= short[r]) or (r not in data + ["packets_dropped_test"] and got[r] != want[r])}
    if wrong or sum(short.values()) != got["packets_dropped_test"]:
        fail(f"{name}: counters (got, sent for that reason) differ: {wrong or got}")
    print(f"ok: {name}: {sent} packets sent, packets={counts['packets']}, every one under one reason: "
          + " ".join(f"{r}={v}" for r, v in got.items() if v))


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in [("feng", feng_mix), ("digitiser", dig_mix)]:
            mix, params, edge = make()
            counts, log = run(cbf_run, tmp, name, mix, params, edge)
            check(name, mix, counts, log)
            if name == "digitiser" and not counts.get("packets_dropped_test"):
                fail("digitiser: drop_rate 0.05 dropped nothing: pick another seed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
