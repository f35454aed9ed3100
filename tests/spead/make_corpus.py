#!/usr/bin/env python3
"""Writes fuzz seeds made by spead2 (the real peer) into tests/spead/corpus:
every packet of a MeerKAT-shaped exchange over loopback UDP: descriptors
(numpy-typed and u48 items), a digitiser heap with its pointers in the
packet (5192 bytes), an F-engine heap cut into several 8872-byte packets,
and the stream stop; and two of them as whole Ethernet frames (headers
built here) for the frame parser. Run once by hand with spead2 installed; the files are
committed (meson's spead_fuzz test only reads them).

usage: make_corpus.py [CORPUS_DIR]
"""
import os
import socket
import struct
import sys

import numpy as np
import spead2
import spead2.send

out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "corpus")
rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
rx.bind(("127.0.0.1", 0))
rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
port = rx.getsockname()[1]
flavour = spead2.Flavour(4, 64, 48, 0)
cfg = spead2.send.StreamConfig(max_packet_size=8872, rate=0)
tx = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)], cfg)

dig = spead2.send.ItemGroup(flavour=flavour)
dig.add_item(0x1600, "timestamp", "", shape=(), format=[("u", 48)])
dig.add_item(0x3101, "digitiser_id", "", shape=(), format=[("u", 48)])
dig.add_item(0x3102, "digitiser_status", "", shape=(), format=[("u", 48)])
dig.add_item(0x3300, "raw_data", "", shape=(5120,), dtype=np.uint8)
tx.send_heap(dig.get_heap(descriptors="all", data="none"))
dig["timestamp"].value = 4096 * 7
dig["digitiser_id"].value = 3
dig["digitiser_status"].value = 0
dig["raw_data"].value = (np.arange(5120) * 37 % 256).astype(np.uint8)
heap = dig.get_heap(descriptors="none", data="all")
heap.repeat_pointers = True
tx.send_heap(heap)

feng = spead2.send.ItemGroup(flavour=flavour)
feng.add_item(0x1600, "timestamp", "", shape=(), format=[("u", 48)])
feng.add_item(0x4101, "feng_id", "", shape=(), format=[("u", 48)])
feng.add_item(0x4103, "frequency", "", shape=(), format=[("u", 48)])
feng.add_item(0x4300, "feng_raw", "", shape=(16, 256, 2, 2), dtype=np.int8)
feng["timestamp"].value = 2 ** 40
feng["feng_id"].value = 2
feng["frequency"].value = 512
feng["feng_raw"].value = (np.arange(16 * 256 * 4) % 251 - 125).astype(np.int8).reshape(16, 256, 2, 2)
tx.send_heap(feng.get_heap(descriptors="all", data="all"))
tx.send_heap(feng.get_end())



def frame(payload, dst="239.10.0.1", dport=7148):
    """payload as an Ethernet/IPv4/UDP frame, headers built here (not by cbf)."""
    group = socket.inet_aton(dst)
    mac = bytes([1, 0, 0x5E, group[1] & 0x7F, group[2], group[3]])
    ip = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 28 + len(payload), 1, 0x4000, 1, 17, 0,
                     socket.inet_aton("10.0.1.5"), group)
    words = sum(struct.unpack("!10H", ip))
    while words >> 16:
        words = (words & 0xFFFF) + (words >> 16)
    ip = ip[:10] + struct.pack("!H", ~words & 0xFFFF) + ip[12:]
    return mac + bytes([0x0C, 0x42, 0xA1, 1, 2, 3]) + b"\x08\x00" + ip + \
        struct.pack("!HHHH", 40000, dport, 8 + len(payload), 0) + payload


rx.settimeout(2)
n = 0
while True:
    try:
        data = rx.recv(9216)
    except socket.timeout:
        break
    with open(os.path.join(out, f"spead2_meerkat_{n:02d}.bin"), "wb") as f:
        f.write(data)
    if n in (1, 4):   # the digitiser packet and the stop, as frames on the wire
        with open(os.path.join(out, f"frame_meerkat_{n:02d}.bin"), "wb") as f:
            f.write(frame(data))
    n += 1
print(f"{n} packets written to {out}")
