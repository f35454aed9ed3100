#!/usr/bin/env python3
"""Interop of cbf's SPEAD codec with spead2, a real peer, over 127.0.0.1 UDP
and pcap files.

usage: interop.py MODE SPEAD_TOOL
  feng  spead2 receives our F-engine heaps: descriptors, every item, shape, value
  xeng  the same for X-engine heaps (spanning several packets)
  dig   spead2 sends MeerKAT-style digitiser heaps; we assemble them
  pcap  our capture read by spead2 and replayed by us; spead2's packets in a
        capture written here replayed by us
Exit 77 (skipped) when spead2 or numpy is missing.
"""
import os
import socket
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import spead2
    import spead2.recv
    import spead2.send
except ImportError as e:  # pragma: no cover
    print(f"skipped: spead2/numpy not importable ({e})")
    sys.exit(77)

FLAVOUR = spead2.Flavour(4, 64, 48, 0)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_records(path, n_fields):
    """Records written by spead_tool: n_fields u64, u64 length, bytes."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    pos = 0
    while pos < len(data):
        fields = struct.unpack_from(f"<{n_fields}Q", data, pos)
        pos += 8 * n_fields
        (n,) = struct.unpack_from("<Q", data, pos)
        pos += 8
        out.append((fields, data[pos:pos + n]))
        pos += n
    return out


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def spead2_collect(stream):
    """Every data heap of a stream as a dict of item name -> value."""
    ig = spead2.ItemGroup()
    heaps = []
    for heap in stream:
        # spead2's stream yields only complete heaps; a lost one shows in the count below.
        updated = ig.update(heap)
        if any(name.endswith("_raw") for name in updated):
            heaps.append({name: item.value for name, item in updated.items()})
    return ig, heaps


def engine(tool, tmp, xeng):
    port = free_port()
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=4))
    stream.add_udp_reader(port, bind_hostname="127.0.0.1")
    ref = os.path.join(tmp, "ref.bin")
    mode = "send-xeng" if xeng else "send-feng"
    subprocess.run([tool, mode, str(port), ref, "12345"], check=True, timeout=30)
    ig, heaps = spead2_collect(stream)
    expected = read_records(ref, 3)
    if len(heaps) != len(expected):
        fail(f"spead2 decoded {len(heaps)} heaps, {len(expected)} were sent")
    raw = "xeng_raw" if xeng else "feng_raw"
    shape = (8, 40, 2) if xeng else (16, 32, 2, 2)
    dtype = np.dtype("<i4") if xeng else np.dtype("i1")
    item = ig[raw]
    if item.id != (0x1800 if xeng else 0x4300) or tuple(item.shape) != shape or item.dtype != dtype:
        fail(f"descriptor of {raw}: id {item.id:#x} shape {item.shape} dtype {item.dtype}")
    for name, iid in [("timestamp", 0x1600), ("frequency", 0x4103)] + ([] if xeng else [("feng_id", 0x4101)]):
        if ig[name].id != iid or ig[name].format != [("u", 48)]:
            fail(f"descriptor of {name}: id {ig[name].id:#x} format {ig[name].format}")
    for got, ((ts, freq, feng), payload) in zip(heaps, expected):
        want = np.frombuffer(payload, dtype).reshape(shape)
        if got["timestamp"] != ts or got["frequency"] != freq:
            fail(f"immediates: got {got['timestamp']}, {got['frequency']}; sent {ts}, {freq}")
        if not xeng and got["feng_id"] != feng:
            fail(f"feng_id {got['feng_id']} != {feng}")
        if got[raw].shape != shape or not np.array_equal(got[raw], want):
            fail(f"{raw} values differ at timestamp {ts}")
    print(f"ok: spead2 decoded {len(heaps)} {raw} heaps with descriptors, values exact")


def dig_heaps(seed, n=8):
    """MeerKAT-style digitiser heaps: 5120 bytes of raw_data, LSB of digitiser_id = pol."""
    rng = np.random.default_rng(seed)
    ig = spead2.send.ItemGroup(flavour=FLAVOUR)
    for name, iid in [("timestamp", 0x1600), ("digitiser_id", 0x3101), ("digitiser_status", 0x3102)]:
        ig.add_item(iid, name, name, shape=(), format=[("u", 48)])
    ig.add_item(0x3300, "raw_data", "packed samples", shape=(5120,), dtype=np.uint8)
    sent = []
    heaps = [ig.get_heap(descriptors="all", data="none")]
    for h in range(n):
        for pol in range(2):
            payload = rng.integers(0, 256, 5120, dtype=np.uint8)
            fields = (h * 4096, 0x0200 | pol, 0)
            ig["timestamp"].value, ig["digitiser_id"].value, ig["digitiser_status"].value = fields
            ig["raw_data"].value = payload
            heap = ig.get_heap(descriptors="none", data="all")
            heap.repeat_pointers = True
            heaps.append(heap)
            sent.append((fields, payload.tobytes()))
    heaps.append(ig.get_end())
    return heaps, sent


def check_received(out, sent, what):
    got = read_records(out, 3)
    if len(got) != len(sent):
        fail(f"{what}: assembled {len(got)} digitiser heaps, {len(sent)} sent")
    for (gf, gp), (sf, sp) in zip(got, sent):
        if tuple(gf) != tuple(sf) or gp != sp:
            fail(f"{what}: heap {sf} differs (got fields {gf}, {len(gp)} bytes)")


def dig(tool, tmp):
    out = os.path.join(tmp, "out.bin")
    proc = subprocess.Popen([tool, "recv", "0", out], stdout=subprocess.PIPE, text=True)
    port = int(proc.stdout.readline().split()[1])
    heaps, sent = dig_heaps(7)
    stream = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)],
                                   spead2.send.StreamConfig(max_packet_size=5192, rate=50e6))
    for heap in heaps:
        stream.send_heap(heap)
    summary = proc.communicate(timeout=30)[0]
    if proc.returncode != 0:
        fail(f"spead_tool recv exited {proc.returncode}: {summary}")
    counts = dict(zip(summary.split()[::2], map(int, summary.split()[1::2])))
    if counts["malformed"] or counts["incomplete"]:
        fail(f"receiver counters: {summary}")
    check_received(out, sent, "udp")
    print(f"ok: assembled {len(sent)} spead2 digitiser heaps ({summary.strip()})")


def pcap_frame(payload, seq):
    """Ethernet/IPv4/UDP frame to 239.10.0.2:7148 (no UDP checksum)."""
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), seq & 0xFFFF, 0x4000, 1, 17, 0,
                     bytes([127, 0, 0, 1]), bytes([239, 10, 0, 2]))
    udp = struct.pack(">HHHH", 7149, 7148, 8 + len(payload), 0)
    eth = bytes([1, 0, 0x5E, 10, 0, 2, 0, 0, 0, 0, 0, 1]) + b"\x08\x00"
    return eth + ip + udp + payload


def split_packets(data):
    """Cut a byte stream of SPEAD packets at their headers."""
    out, pos = [], 0
    while pos < len(data):
        (n_items,) = struct.unpack_from(">H", data, pos + 6)
        plen = None
        for i in range(n_items):
            (p,) = struct.unpack_from(">Q", data, pos + 8 + 8 * i)
            if (p >> 48) & 0x7FFF == 4:
                plen = p & ((1 << 48) - 1)
        size = 8 + 8 * n_items + plen
        out.append(data[pos:pos + size])
        pos += size
    return out


def pcap(tool, tmp):
    # Ours -> spead2 and back to us.
    cap, ref = os.path.join(tmp, "ours.pcap"), os.path.join(tmp, "ref.bin")
    subprocess.run([tool, "pcap-dig", cap, ref, "99"], check=True, timeout=30)
    sent = read_records(ref, 3)
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=4))
    stream.add_udp_pcap_file_reader(cap)
    got = []
    for heap in stream:
        items = {it.id: it for it in heap.get_items()}
        if 0x3300 in items:
            imm = [items[i].immediate_value if items[i].is_immediate else None
                   for i in (0x1600, 0x3101, 0x3102)]
            got.append((tuple(imm), bytes(memoryview(items[0x3300]))))
    if [(tuple(f), p) for f, p in sent] != got:
        fail(f"spead2 read {len(got)} heaps from our pcap; they differ from the {len(sent)} sent")
    out = os.path.join(tmp, "out.bin")
    r = subprocess.run([tool, "recv-pcap", cap, out], capture_output=True, text=True, timeout=30)
    if r.returncode:
        fail(f"recv-pcap: {r.stderr}")
    check_received(out, [(tuple(f), p) for f, p in sent], "our pcap")
    # spead2's packets -> a capture written here -> us.
    heaps, sent2 = dig_heaps(3)
    bs = spead2.send.BytesStream(spead2.ThreadPool(), spead2.send.StreamConfig(max_packet_size=5192))
    for heap in heaps:
        bs.send_heap(heap)
    frames = [pcap_frame(p, i) for i, p in enumerate(split_packets(bs.getvalue()))]
    cap2 = os.path.join(tmp, "spead2.pcap")
    with open(cap2, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i, 0, len(fr), len(fr)) + fr)
    r = subprocess.run([tool, "recv-pcap", cap2, out], capture_output=True, text=True, timeout=30)
    if r.returncode:
        fail(f"recv-pcap of spead2 capture: {r.stderr}")
    check_received(out, sent2, "spead2 pcap")
    print(f"ok: pcap both ways ({len(sent)} and {len(sent2)} heaps)")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    mode, tool = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as tmp:
        {"feng": lambda: engine(tool, tmp, False), "xeng": lambda: engine(tool, tmp, True),
         "dig": lambda: dig(tool, tmp), "pcap": lambda: pcap(tool, tmp)}[mode]()
    return 0


if __name__ == "__main__":
    sys.exit(main())
