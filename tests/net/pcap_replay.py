#!/usr/bin/env python3
"""A capture replayed through the receiver plugin, as a user would: the
sender's digitiser stream (pipelines/dsim-sender.yaml, unicast to a socket
of this script) is captured into a pcap file written here (Ethernet frames
built with struct, an ARP frame, a TCP segment and an IPv4 fragment mixed
in, which the receiver must skip and count as foreign), then `cbf-run` with
pipelines/receiver-hdf5.yaml and `source: pcap` must give dsim -> filesink
bit for bit. Should the capturing socket lose packets, exactly the heaps
of the packets lost must come out flagged and the rest identical.

Mixed in too, each just before the genuine packet it copies: 16 copies of
data packets, with other payloads, to port 9999, and 4 to the stream's port
at another address. A socket bound to the stream's address would not see
them: the replay must not take them (before, they displaced the genuine
heaps, whose packets then counted as duplicates) and must count them in
packets_other_destination.

usage: pcap_replay.py CBF_RUN
"""
import os
import socket
import struct
import subprocess
import sys
import tempfile
import threading

try:
    import h5py
    import numpy as np
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/yaml not importable ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import compare_with_dsim, write_yaml  # noqa: E402

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LENGTH, SPC = 4 * 262144, 262144


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


DEST = bytes([127, 0, 0, 1])   # where the capturing socket was bound


def udp_frame(payload, seq, dport, frag=0, dst=DEST):
    ip = struct.pack(">BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), seq & 0xFFFF, frag, 64, 17, 0,
                     bytes([10, 0, 0, 1]), dst)
    udp = struct.pack(">HHHH", 40000, dport, 8 + len(payload), 0)
    return bytes([2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1]) + b"\x08\x00" + ip + udp + payload


def write_pcap(path, packets, dport, strays=False):
    """libpcap format, Ethernet link type; foreign frames every 100 packets;
    with strays, the datagrams to another port or address (see above).
    Returns the frames to skip as foreign, and the strays."""
    arp = bytes([255] * 6 + [2, 0, 0, 0, 0, 1]) + b"\x08\x06" + bytes(28)
    tcp = bytearray(udp_frame(bytes(20), 0, dport))
    tcp[23] = 6   # protocol TCP
    frames, n_strays = [], 0
    data = [i for i, p in enumerate(packets) if len(p) > 1000]
    stray_at = {data[k * len(data) // 20]: k for k in range(20)} if strays else {}
    for i, p in enumerate(packets):
        if i % 100 == 50:
            frames += [arp, bytes(tcp), udp_frame(p[:64], i, dport, frag=0x2000)]  # more-fragments
        if i in stray_at:
            # The packet's items (its heap's place), another payload.
            k = stray_at[i]
            other = p[:-64] + bytes([k + 1]) * 64
            frames.append(udp_frame(other, i, 9999) if k < 16 else udp_frame(other, i, dport, dst=bytes([10, 0, 0, 9])))
            n_strays += 1
        frames.append(udp_frame(p, i, dport))
    with open(path, "wb") as f:
        f.write(struct.pack("<IHHiIII", 0xA1B2C3D4, 2, 4, 0, 0, 65535, 1))
        for i, fr in enumerate(frames):
            f.write(struct.pack("<IIII", i // 1000, i % 1000 * 1000, len(fr), len(fr)) + fr)
    return len(frames) - len(packets) - n_strays, n_strays


def capture_stream(cbf_run, tmp, doc_for):
    """Runs the pipeline doc_for(port) (a sender to 127.0.0.1:port) and
    returns the UDP payloads a socket of this script received on the port,
    up to the stream stop, with the port."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 << 20)
    sock.bind(("127.0.0.1", 0))
    sock.settimeout(3)
    port = sock.getsockname()[1]
    packets = []

    def capture():
        while True:
            try:
                p = sock.recv(65536)
            except socket.timeout:
                return
            packets.append(p)
            # The stream stop (item 0x0006 = 2, immediate, in a 48-byte packet) ends it.
            if len(p) <= 64 and b"\x80\x06\x00\x00\x00\x00\x00\x02" in p:
                return

    t = threading.Thread(target=capture)
    t.start()
    write_yaml(os.path.join(tmp, "tx.yaml"), doc_for(port))
    subprocess.run([cbf_run, os.path.join(tmp, "tx.yaml"), "--quiet"], check=True, timeout=120)
    t.join()
    sock.close()
    return packets, port


def main():
    cbf_run = sys.argv[1]
    with open(os.path.join(ROOT, "pipelines", "dsim-sender.yaml")) as f:
        sender = yaml.safe_load(f)
    with open(os.path.join(ROOT, "pipelines", "receiver-hdf5.yaml")) as f:
        receiver = yaml.safe_load(f)
    dsim = sender["nodes"]["dsim"]["params"]
    dsim.update(samples_per_chunk=SPC, length=LENGTH, seed=23)

    def sender_to(port):
        sender["nodes"]["send"]["params"].update(destinations=f"127.0.0.1:{port}", rate_gbps=0.3)
        return sender

    with tempfile.TemporaryDirectory() as tmp:
        packets, port = capture_stream(cbf_run, tmp, sender_to)
        if not packets:
            fail("nothing captured from the sender")
        cap = os.path.join(tmp, "capture.pcap")
        foreign, strays = write_pcap(cap, packets, port, strays=True)
        rx = receiver["nodes"]["recv"]["params"]
        rx.update(source="pcap", pcap=cap, samples_per_chunk=SPC, address=f"127.0.0.1:{port}")
        receiver["nodes"]["sink"]["params"]["path"] = os.path.join(tmp, "rx.h5")
        write_yaml(os.path.join(tmp, "rx.yaml"), receiver)
        r = subprocess.run([cbf_run, os.path.join(tmp, "rx.yaml")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode:
            fail(f"replay exited {r.returncode}: {r.stdout}")
        present, same, _, _, _ = compare_with_dsim(cbf_run, dsim, tmp)
        # Data packets captured: all but the descriptors (item 0x0005) and the stop.
        data_packets = sum(1 for p in packets if len(p) > 1000)
        counters = dict(w.split("=", 1) for w in r.stdout.split() if "=" in w and w.split("=", 1)[1].isdigit())
        # Every frame read is a packet taken, counted under one reason.
        if int(counters.get("packets", -1)) != len(packets) + foreign + strays:
            fail(f"receiver counted {counters.get('packets')} packets; the capture holds {len(packets)} "
                 f"SPEAD packets, {foreign} frames to skip and {strays} datagrams to elsewhere")
        if int(counters.get("malformed_foreign", -1)) != foreign:
            fail(f"receiver counted {counters.get('malformed_foreign')} foreign frames; the capture holds {foreign}")
        if strays != 20 or int(counters.get("packets_other_destination", -1)) != strays:
            fail(f"receiver counted {counters.get('packets_other_destination')} datagrams to another port or "
                 f"address; the capture holds {strays} (16 to port 9999, 4 to 10.0.0.9)")
        if int(counters.get("packets_duplicate", -1)) != 0:
            fail(f"{counters.get('packets_duplicate')} packets counted duplicate: strays taken as the stream's")
        if int(present.sum()) != data_packets or not same[present == 1].all():
            fail(f"{data_packets} data packets captured of {present.size} heaps, but {int(present.sum())} "
                 f"heaps present; {int((~same[present == 1]).sum())} present heaps differ")
        if data_packets < present.size // 2:
            fail(f"only {data_packets} of {present.size} heaps captured: the test says little")
        print(f"ok: {len(packets)} captured packets, {foreign} foreign frames and {strays} datagrams to "
              f"elsewhere (counted, not taken) replayed from pcap; "
              f"{data_packets} of {present.size} heaps present and identical to dsim -> filesink")
    return 0


if __name__ == "__main__":
    sys.exit(main())
