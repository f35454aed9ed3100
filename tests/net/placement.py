#!/usr/bin/env python3
"""The receiver places every packet straight into its chunk, so a heap's
packets may arrive interleaved with other heaps' and on any thread. spead2
sends F-engine heaps of 4 packets each to our receiver (stream feng,
filesink after it), and the chunks must hold exactly what was sent:
  1. item pointers repeated in every packet, the packets of all heaps
     interleaved (spead2's round-robin group), three receiving sockets with
     `spread: packet`: every socket takes packets from the one flow;
  2. the same with `spread: flow`: the one flow stays on one socket;
  3. item pointers in the first packet only (spead2's default), one socket:
     later packets follow the heap counter to where the first one went;
  4. one heap sent twice and a heap with a packet lost (receiver
     `drop_rate`): the extra packets are counted as duplicates and change
     nothing; a heap with a hole is counted incomplete, its flag is
     missing, and its bytes are zero.

usage: placement.py CBF_RUN
"""
import os
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
from loopback import fail, free_port, write_yaml  # noqa: E402

ANTS, CHANNELS, CPH, SPECTRA, BATCHES, CHUNKS = 4, 128, 32, 256, 2, 4
STEP = SPECTRA * 2 * CHANNELS             # timestamp step of one batch
FLAVOUR = spead2.Flavour(4, 64, 48, 0)
PACKET = 8872                             # a 32 KiB heap is 4 packets


def make_data(seed):
    """[chunk][batch][antenna][channel][spectrum][pol][re, im] int8."""
    rng = np.random.default_rng(seed)
    return rng.integers(-128, 128, (CHUNKS, BATCHES, ANTS, CHANNELS, SPECTRA, 2, 2), dtype=np.int8)


def make_heaps(data, repeat, twice=None):
    ig = spead2.send.ItemGroup(flavour=FLAVOUR)
    for name, iid in [("timestamp", 0x1600), ("feng_id", 0x4101), ("frequency", 0x4103)]:
        ig.add_item(iid, name, name, shape=(), format=[("u", 48)])
    ig.add_item(0x4300, "feng_raw", "channelised data", shape=(CPH, SPECTRA, 2, 2), dtype=np.int8)
    heaps = []
    for c in range(CHUNKS):
        for b in range(BATCHES):
            for a in range(ANTS):
                for f in range(0, CHANNELS, CPH):
                    ig["timestamp"].value = (c * BATCHES + b) * STEP
                    ig["feng_id"].value, ig["frequency"].value = a, f
                    ig["feng_raw"].value = data[c, b, a, f:f + CPH]
                    heap = ig.get_heap(descriptors="none", data="all")
                    heap.repeat_pointers = repeat
                    heaps.append(heap)
                    if twice == len(heaps) - 1:
                        heaps.append(heap)
    return heaps, ig.get_end()


def sockets_on(port):
    """UDP sockets bound to this port: the receiver has opened them all."""
    with open("/proc/net/udp") as f:
        return sum(line.split()[1].endswith(f":{port:04X}") for line in f.readlines()[1:])


def receive(cbf_run, tmp, name, heaps, end, round_robin, **rx):
    port = free_port()
    path = os.path.join(tmp, name + ".h5")
    params = {"address": f"127.0.0.1:{port}", "stream": "feng", "antennas": ANTS, "channels": CHANNELS,
              "channels_per_heap": CPH, "spectra_per_heap": SPECTRA, "batches": BATCHES,
              "chunks_in_flight": CHUNKS, "buffers": CHUNKS + 2, "idle_timeout": 10, **rx}
    doc = {"engine": {"gpu": "none"},
           "nodes": {"recv": {"plugin": "receiver", "params": params},
                     "sink": {"plugin": "filesink", "params": {"path": path}}},
           "edges": ["recv.batches -> sink.in"]}
    yml = os.path.join(tmp, name + ".yaml")
    write_yaml(yml, doc)
    proc = subprocess.Popen([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while sockets_on(port) < rx.get("threads_per_address", 1):
        if proc.poll() is not None or time.monotonic() > deadline:
            fail(f"{name}: receiver did not start: {proc.communicate()[0]}")
        time.sleep(0.01)
    # One socket, so one flow; slow enough that no socket buffer overflows.
    stream = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", port)],
                                   spead2.send.StreamConfig(max_packet_size=PACKET, rate=100e6,
                                                            max_heaps=len(heaps) + 1))
    if round_robin:
        stream.send_heaps([spead2.send.HeapReference(h) for h in heaps], spead2.send.GroupMode.ROUND_ROBIN)
    else:
        for h in heaps:
            stream.send_heap(h)
    stream.send_heap(end)
    log = proc.communicate(timeout=60)[0]
    if proc.returncode:
        fail(f"{name}: receiver exited {proc.returncode}: {log}")
    counts = {w.split("=")[0]: int(w.split("=")[1]) for w in log.split() if "=" in w and w.split("=")[1].isdigit()}
    sockets = [int(x) for x in log.split("packets by socket:")[1].split("\n")[0].split()] \
        if "packets by socket:" in log else []
    out = h5py.File(path)["recv"]
    return out["data"][()], out["present"][()], counts, sockets, log


def check_equal(name, data, got, present):
    if got.shape != data.shape or not present.all() or not np.array_equal(got, data):
        fail(f"{name}: chunks differ from what was sent ({int((present == 0).sum())} flags missing)")


def main():
    cbf_run = sys.argv[1]
    data = make_data(11)
    n_heaps = CHUNKS * BATCHES * ANTS * (CHANNELS // CPH)
    with tempfile.TemporaryDirectory() as tmp:
        heaps, end = make_heaps(data, True)
        got, present, counts, sockets, log = receive(cbf_run, tmp, "spread", heaps, end, True,
                                                     threads_per_address=3, spread="packet")
        check_equal("interleaved, spread packet", data, got, present)
        if counts.get("heaps") != n_heaps or counts.get("heaps_incomplete") or len(sockets) != 3 or min(sockets) == 0:
            fail(f"spread packet: {counts}, packets by socket {sockets}: {log}")
        print(f"ok: {n_heaps} heaps with interleaved packets over 3 sockets {sockets}, placed exactly")

        got, present, counts, sockets, log = receive(cbf_run, tmp, "flow", heaps, end, True,
                                                     threads_per_address=3, spread="flow")
        check_equal("interleaved, spread flow", data, got, present)
        if len(sockets) != 3 or sorted(sockets)[:2] != [0, 0]:
            fail(f"spread flow: one flow should stay on one socket, got {sockets}")
        print(f"ok: spread flow keeps the one flow on one socket {sockets}")

        heaps, end = make_heaps(data, False)
        got, present, counts, _, log = receive(cbf_run, tmp, "first", heaps, end, False)
        check_equal("pointers in the first packet only", data, got, present)
        if counts.get("heaps") != n_heaps:
            fail(f"pointers in the first packet only: {counts}")
        print(f"ok: {n_heaps} heaps whose items come in the first packet only, placed exactly")

        heaps, end = make_heaps(data, True, twice=5)
        got, present, counts, _, log = receive(cbf_run, tmp, "twice", heaps, end, False)
        check_equal("a heap sent twice", data, got, present)
        if counts.get("packets_duplicate") != 4 or counts.get("heaps") != n_heaps:
            fail(f"a heap sent twice: expected its 4 packets counted as duplicates: {counts}")
        print("ok: a heap sent twice: 4 duplicate packets counted, chunks unchanged")

        heaps, end = make_heaps(data, True)
        got, present, counts, _, log = receive(cbf_run, tmp, "drop", heaps, end, False,
                                               drop_rate=0.02, drop_seed=5)
        # present: [chunk][batch x antenna]; a flag covers its 4 channel ranges.
        flags = present.reshape(CHUNKS, BATCHES, ANTS).astype(bool)
        lost = counts.get("packets_dropped_test", 0)
        if not lost or flags.all() or counts.get("heaps_incomplete", 0) == 0:
            fail(f"drop_rate 0.02: expected lost packets and incomplete heaps: {counts}")
        if counts["flags_missing"] != int((~flags).sum()):
            fail(f"flags_missing {counts['flags_missing']} but {int((~flags).sum())} flags cleared")
        if not np.array_equal(got[flags], data[flags]):
            fail("drop_rate 0.02: a flag that is present holds other bytes than were sent")
        # A flag is missing when some range lost a packet: the lost ranges are zero.
        for c, b, a in zip(*np.nonzero(~flags)):
            for f in range(0, CHANNELS, CPH):
                r = got[c, b, a, f:f + CPH]
                if r.any() and not np.array_equal(r, data[c, b, a, f:f + CPH]):
                    fail(f"chunk {c} batch {b} antenna {a} channel {f}: part of a heap passed on")
        print(f"ok: {lost} packets lost: {counts['heaps_incomplete']} heaps incomplete, "
              f"{counts['flags_missing']} flags missing, their holes zero")
    return 0


if __name__ == "__main__":
    sys.exit(main())
