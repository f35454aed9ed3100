#!/usr/bin/env python3
"""Several sending and receiving threads change nothing but the speed:
  1. dsim -> sender with `threads: 3` (and two interfaces) sends exactly the
     heaps `threads: 1` sends, bit for bit as spead2 receives them: heap
     counters, every item's id and bytes;
  2. the receiver with three threads (`threads_per_address: 3`, pinned by
     `affinity`) fed by a three-thread sender assembles the same chunks as
     one thread fed by one thread (samples, timestamps, presence flags), no
     heap placed twice;
  3. parameters that cannot work are refused at start, naming their YAML
     place: an affinity list that does not give one core per thread, a core
     that does not exist, pinned chunk memory in an engine without the GPU.

usage: threads.py CBF_RUN
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
    import spead2.recv
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/spead2/yaml not importable ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import bound, fail, free_port  # noqa: E402

SPC = 262144
LENGTH = 4 * SPC


def write(tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def sender_doc(port, threads, **extra):
    params = {"destinations": f"127.0.0.1:{port}", "interface": "127.0.0.1,127.0.0.2",
              "rate_gbps": 0.5, "threads": threads, **extra}
    return {"engine": {"gpu": "none"},
            "nodes": {"dsim": {"plugin": "dsim", "params": {
                          "antennas": 2, "samples_per_chunk": SPC, "length": LENGTH, "seed": 7,
                          "missing": [5, 70]}},
                      "send": {"plugin": "sender", "params": params}},
            "edges": ["dsim.out -> send.in"]}


def receiver_doc(port, path, threads, **extra):
    params = {"address": f"127.0.0.1:{port}", "antennas": 2, "samples_per_chunk": SPC,
              "threads_per_address": threads, "idle_timeout": 10, **extra}
    return {"engine": {"gpu": "none"},
            "nodes": {"recv": {"plugin": "receiver", "params": params},
                      "sink": {"plugin": "filesink", "params": {"path": path}}},
            "edges": ["recv.out -> sink.in"]}


def spead2_heaps(cbf_run, tmp, threads):
    """Every heap the sender sends, as spead2 receives it: {cnt: items}."""
    port = free_port()
    # A ring with room for every heap: spead2's thread never waits for this one.
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=16),
                                spead2.recv.RingStreamConfig(heaps=2048))
    stream.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=4 << 20)
    subprocess.run([cbf_run, write(tmp, f"tx{threads}", sender_doc(port, threads)), "--quiet"],
                   check=True, timeout=120)
    heaps = {}
    for heap in stream:
        if heap.cnt in heaps:
            fail(f"threads {threads}: heap {heap.cnt} twice")
        heaps[heap.cnt] = sorted((it.id, bytes(it)) for it in heap.get_items())
    return heaps


def received(cbf_run, tmp, threads, rx_extra):
    port = free_port()
    path = os.path.join(tmp, f"rx{threads}.h5")
    proc = subprocess.Popen([cbf_run, write(tmp, f"rx{threads}", receiver_doc(port, path, threads, **rx_extra))],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not bound(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            fail(f"receiver did not start: {proc.communicate()[0]}")
        time.sleep(0.01)
    subprocess.run([cbf_run, write(tmp, f"tx-rx{threads}", sender_doc(port, threads)), "--quiet"],
                   check=True, timeout=120)
    log = proc.communicate(timeout=60)[0]
    if proc.returncode:
        fail(f"receiver with {threads} threads exited {proc.returncode}: {log}")
    if f"{threads} socket queue(s)" not in log:
        fail(f"receiver did not open {threads} sockets: {log}")
    bad = [int(w.split("=")[1]) for w in log.split() if w.startswith("heaps_bad=")]
    if bad != [0]:
        fail(f"heaps placed twice or not fitting the stream: {bad}")
    f = h5py.File(path)["recv"]
    return f["timestamp"][()], f["present"][()], f["data"][()]


def refused(cbf_run, tmp, name, doc, param, words):
    path = write(tmp, name, doc)
    with open(path) as f:
        line = 1 + next(i for i, text in enumerate(f) if text.strip().startswith(param + ":"))
    r = subprocess.run([cbf_run, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=30)
    # A block list's value starts on the line after its key.
    if r.returncode == 0 or words not in r.stdout or not any(
            f"{name}.yaml:{n}:" in r.stdout for n in (line, line + 1)):
        fail(f"{name}: exit {r.returncode}, expected an error naming {name}.yaml:{line} and "
             f"'{words}': {r.stdout}")


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        one, three = spead2_heaps(cbf_run, tmp, 1), spead2_heaps(cbf_run, tmp, 3)
        # 4 inputs x 64 heaps x 4 chunks, less 2 heaps x 4 inputs missing, and the descriptors.
        if len(one) != 4 * 64 * 4 - 2 * 4 + 1 or one != three:
            fail(f"spead2: 1 thread sent {len(one)} heaps, 3 threads {len(three)}; "
                 f"{sum(one.get(k) != v for k, v in three.items())} differ")
        print(f"ok: spead2 received the same {len(one)} heaps, bit for bit, from 1 and 3 sending threads")

        ts1, p1, d1 = received(cbf_run, tmp, 1, {})
        ts3, p3, d3 = received(cbf_run, tmp, 3, {"affinity": [0, 0, 0], "socket_buffer": 8 << 20})
        if not (np.array_equal(ts1, ts3) and np.array_equal(p1, p3) and np.array_equal(d1, d3)):
            fail(f"3 receiving threads differ from 1: timestamps {ts1} / {ts3}, "
                 f"{int((p1 != p3).sum())} flags, data equal {np.array_equal(d1, d3)}")
        if p1.all() or p1.sum() != p1.size - 2 * 4:
            fail(f"expected the 8 heaps dsim flagged missing, got {p1.size - int(p1.sum())}")
        print(f"ok: 3 receiving threads assembled the same {len(ts1)} chunks as 1, "
              f"{p1.size - int(p1.sum())} heaps flagged as at the source")

        port = free_port()
        refused(cbf_run, tmp, "rx-count", receiver_doc(port, "x.h5", 2, affinity=[0]), "affinity",
                "1 cores for 2 threads")
        refused(cbf_run, tmp, "rx-core", receiver_doc(port, "x.h5", 1, affinity=[65000]), "affinity",
                "core 65000 does not exist")
        refused(cbf_run, tmp, "tx-core", sender_doc(port, 2, affinity=[0, 65000]), "affinity",
                "core 65000 does not exist")
        refused(cbf_run, tmp, "rx-pinned", receiver_doc(port, "x.h5", 1, memory="pinned"), "memory",
                "pinned memory needs the GPU")
        print("ok: bad affinity lists and pinned memory without the GPU refused, naming the parameter")
    return 0


if __name__ == "__main__":
    sys.exit(main())
