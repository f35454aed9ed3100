#!/usr/bin/env python3
"""Digitiser stream over loopback multicast in two cbf-run processes:
dsim -> sender | receiver -> filesink must equal dsim -> filesink, bit for
bit (samples, timestamps, presence flags). With --drop RATE the receiver
drops that fraction of packets (seeded): exactly as many heaps must come out
flagged missing as packets were dropped (one packet per digitiser heap), and
every heap still flagged present must equal the reference.

With --threads the stream is unicast to 127.0.0.1, the sender splits heaps
over two interfaces (127.0.0.1 and 127.0.0.2: two flows) and the receiver
runs two sockets and threads on the port (SO_REUSEPORT spreads flows): the
result must not change and no heap may arrive twice.

With --fallback both ends ask for `transport: ibverbs` with `fallback:
true`: loopback is not on an RDMA NIC, so both must say why and fall back
to sockets, with the same result; and a receiver that asks for ibverbs
without fallback must refuse to start, naming its YAML place and the reason.

usage: loopback.py CBF_RUN [--drop RATE | --threads | --fallback]
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
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/yaml not importable ({e})")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LENGTH = 4 * 262144
SPC = 262144


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bound(port):
    """Whether some UDP socket is bound to this port (the receiver is up)."""
    with open("/proc/net/udp") as f:
        return any(line.split()[1].endswith(f":{port:04X}") for line in f.readlines()[1:])


def write_yaml(path, doc):
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)


def start_receiver(cbf_run, tmp, name, port, doc):
    """Starts cbf-run on doc (written to tmp/name.yaml) and returns once
    its receiver has bound port."""
    yml = os.path.join(tmp, name + ".yaml")
    write_yaml(yml, doc)
    proc = subprocess.Popen([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not bound(port):
        if proc.poll() is not None or time.monotonic() > deadline:
            fail(f"{name}: receiver did not start: {proc.communicate()[0]}")
        time.sleep(0.01)
    return proc


def end_counts(name, proc):
    """Waits for the run to end (at its stream stop) and returns the
    end-of-run counters (name=value words of the log) and the log."""
    try:
        log = proc.communicate(timeout=60)[0]
    except subprocess.TimeoutExpired:
        proc.kill()
        fail(f"{name}: the receiver did not end within 60 s of the stream stop")
    if proc.returncode:
        fail(f"{name}: receiver exited {proc.returncode}: {log}")
    counts = {}
    for w in log.split():
        k, _, v = w.partition("=")
        if v.isdigit():
            counts[k] = int(v)
    return counts, log


def compare_with_dsim(cbf_run, dsim, tmp):
    """Runs dsim -> filesink with the dsim parameters given and compares
    tmp/rx.h5 (node recv) with it, heap by heap: returns the presence flags,
    whether each heap is equal, both data arrays and their shape in heaps."""
    reference = {"engine": {"gpu": "none"},
                 "nodes": {"dsim": {"plugin": "dsim", "params": dsim},
                           "sink": {"plugin": "filesink", "params": {"path": os.path.join(tmp, "ref.h5")}}},
                 "edges": ["dsim.out -> sink.in"]}
    write_yaml(os.path.join(tmp, "ref.yaml"), reference)
    subprocess.run([cbf_run, os.path.join(tmp, "ref.yaml"), "--quiet"], check=True, timeout=60)
    got = h5py.File(os.path.join(tmp, "rx.h5"))["recv"]
    want = h5py.File(os.path.join(tmp, "ref.h5"))["dsim"]
    if not np.array_equal(got["timestamp"][()], want["timestamp"][()]):
        fail(f"timestamps {got['timestamp'][()]} != {want['timestamp'][()]}")
    present = got["present"][()]
    data, ref = got["data"][()], want["data"][()]
    shape = data.shape[:3] + (dsim["samples_per_chunk"] // 4096, 4096 * dsim["bits"] // 8)
    same = (data.reshape(shape) == ref.reshape(shape)).all(axis=-1).reshape(present.shape)
    return present, same, data, ref, shape


def refuse(cbf_run, receiver, tmp):
    """transport: ibverbs without fallback on loopback: cbf-run must fail
    in init, naming the parameter's YAML place and what is missing."""
    doc = yaml.safe_load(yaml.safe_dump(receiver))
    doc["nodes"]["recv"]["params"]["fallback"] = False
    path = os.path.join(tmp, "refuse.yaml")
    write_yaml(path, doc)
    with open(path) as f:
        line = 1 + next(i for i, text in enumerate(f) if text.strip().startswith("transport:"))
    r = subprocess.run([cbf_run, path], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=30)
    why = ("is not on an RDMA NIC", "built without libibverbs")
    if r.returncode == 0 or f"refuse.yaml:{line}:" not in r.stdout or not any(w in r.stdout for w in why):
        fail(f"ibverbs without fallback: exit {r.returncode}, expected an error naming "
             f"refuse.yaml:{line} and the reason: {r.stdout}")


def main():
    cbf_run = sys.argv[1]
    drop = float(sys.argv[3]) if len(sys.argv) > 3 and sys.argv[2] == "--drop" else 0.0
    threads = "--threads" in sys.argv
    fallback = "--fallback" in sys.argv
    with open(os.path.join(ROOT, "pipelines", "dsim-sender.yaml")) as f:
        sender = yaml.safe_load(f)
    with open(os.path.join(ROOT, "pipelines", "receiver-hdf5.yaml")) as f:
        receiver = yaml.safe_load(f)
    port = free_port()
    group = f"239.10.0.{7 + int(drop * 100) + 50 * threads + 60 * fallback}:{port}"
    dsim = sender["nodes"]["dsim"]["params"]
    dsim.update(samples_per_chunk=SPC, length=LENGTH, seed=11)
    sender["nodes"]["send"]["params"].update(destinations=group, rate_gbps=0.5)
    rx = receiver["nodes"]["recv"]["params"]
    rx.update(address=group, samples_per_chunk=SPC, idle_timeout=10)
    if drop:
        rx.update(drop_rate=drop, drop_seed=5)
    if threads:
        group = f"127.0.0.1:{port}"
        rx.update(threads_per_address=2, address=group)
        sender["nodes"]["send"]["params"].update(interface="127.0.0.1,127.0.0.2", destinations=group)
    if fallback:
        for p in (rx, sender["nodes"]["send"]["params"]):
            p.update(transport="ibverbs", fallback=True)
    with tempfile.TemporaryDirectory() as tmp:
        receiver["nodes"]["sink"]["params"]["path"] = os.path.join(tmp, "rx.h5")
        if fallback:
            refuse(cbf_run, receiver, tmp)
        for name, doc in [("tx", sender), ("rx", receiver)]:
            write_yaml(os.path.join(tmp, name + ".yaml"), doc)
        rx_proc = subprocess.Popen([cbf_run, os.path.join(tmp, "rx.yaml")],
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while not bound(port):   # the receiver binds in init, before it runs
            if rx_proc.poll() is not None or time.monotonic() > deadline:
                fail(f"receiver did not start: {rx_proc.communicate()[0]}")
            time.sleep(0.01)
        tx = subprocess.run([cbf_run, os.path.join(tmp, "tx.yaml")], stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, timeout=60)
        if tx.returncode:
            fail(f"sender exited {tx.returncode}: {tx.stdout}")
        rx_log = rx_proc.communicate(timeout=60)[0]
        if fallback:
            for who, log in (("receiver", rx_log), ("sender", tx.stdout)):
                if "falling back to sockets" not in log or "1 socket queue(s)" not in log:
                    fail(f"{who} did not report its fallback to sockets: {log}")
        if rx_proc.returncode:
            fail(f"receiver exited {rx_proc.returncode}: {rx_log}")
        present, same, data, ref, shape = compare_with_dsim(cbf_run, dsim, tmp)
        bad = [int(w.split("=")[1]) for w in rx_log.split() if w.startswith("heaps_bad=")]
        if bad != [0]:
            fail(f"heaps placed twice or not fitting the stream: {bad}")
        if not drop:
            if not np.array_equal(data, ref) or not present.all():
                fail(f"received samples differ ({(~same).sum()} heaps) or flags missing "
                     f"({(present == 0).sum()})")
            print(f"ok: {present.size} heaps in {len(present)} chunks identical over loopback multicast"
                  + (" (2 interfaces, 2 receiving threads)" if threads else "")
                  + (" (ibverbs asked for, both ends fell back to sockets)" if fallback else ""))
            return 0
        dropped = [int(w.split("=")[1]) for w in rx_log.split() if w.startswith("packets_dropped_test=")]
        if not dropped:
            fail(f"receiver did not report its injected drops: {rx_log}")
        missing = int((present == 0).sum())
        if missing != dropped[0] or not same[present == 1].all():
            fail(f"{dropped[0]} packets dropped but {missing} heaps flagged; "
                 f"{int((~same[present == 1]).sum())} present heaps differ")
        if (data.reshape(shape)[(present == 0).reshape(shape[:4])] != 0).any():
            fail("a heap flagged missing is not zero-filled")
        print(f"ok: drop {drop:.0%}: {dropped[0]} packets dropped, exactly those heaps flagged, rest identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
