#!/usr/bin/env python3
"""X-engine output on the wire, as katgpucbf's xbgpu sends it, with spead2
as the receiver:

1. Two X-engines, one process: 2 dsims (an antenna each) -> 2 F-engines -> sender
   -> loopback -> 2 receivers (channels 0..127 and 128..255 of 256) ->
   correlator -> reducer -> sender, both X-engines into ONE spead2 stream,
   and each reducer's output also to filesink (the reference). Every heap
   must arrive (spead2 keys heaps by counter: equal counters from two
   X-engines would merge or drop heaps), with `frequency` the absolute first
   channel, counters distinct and counter mod (band / channels_per_heap) =
   frequency / channels_per_heap, values as in the file; a dump in which no
   antenna was present (both dsims lose a heap) is not sent and is counted
   in `dumps_not_sent_no_antennas`, while a dump missing one antenna is
   sent with its missing-data values.
2. fsim -> correlator -> reducer -> sender and filesink, every antenna
   flagged in one batch: exactly that dump is missing on the wire and
   counted, every other dump is sent.
3. X-engine channel ranges that do not tile one band are refused.
Parts 1 and 2 run with `gpu: auto`: on a GPU machine correlator and reducer run on
the GPU and the sender reads their pinned visibilities.

usage: xeng_wire.py CBF_RUN
"""
import os
import re
import subprocess
import sys
import tempfile
import threading

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
from loopback import fail, free_port  # noqa: E402

CHANNELS, PER_X, XCPH, SPECTRA, DUMP = 256, 128, 64, 256, 2
SPC = 262144
MAGIC = -2**31


def spead2_stream(port):
    """One stream for every X-engine: stream stops do not end it (there is
    one per X-engine); the ring holds every heap of a run."""
    stream = spead2.recv.Stream(spead2.ThreadPool(),
                                spead2.recv.StreamConfig(max_heaps=16, stop_on_stop_item=False),
                                spead2.recv.RingStreamConfig(heaps=4096))
    stream.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=4 << 20)
    return stream


def collect(stream, stops):
    """Data heaps as {(timestamp, frequency): (cnt, xeng_raw)}, failing on a
    repeated (timestamp, frequency); and the counter of every heap. Ends at
    the last sender's stream stop, or 30 s after the call if one is lost."""
    ig = spead2.ItemGroup()
    got, cnts = {}, []
    timer = threading.Timer(30, stream.stop)
    timer.start()
    for heap in stream:
        cnts.append(heap.cnt)
        if heap.is_end_of_stream():
            stops -= 1
            if stops == 0:
                break
            continue
        if "xeng_raw" in ig.update(heap):
            key = (ig["timestamp"].value, ig["frequency"].value)
            if key in got:
                fail(f"heap at timestamp {key[0]}, frequency {key[1]} arrived twice")
            got[key] = (heap.cnt, ig["xeng_raw"].value.copy())
    timer.cancel()
    stream.stop()
    if stops:
        fail(f"{stops} stream stop(s) never arrived")
    return got, cnts


def run(cbf_run, tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    out = subprocess.run([cbf_run, path], capture_output=True, text=True, timeout=240)
    if out.returncode:
        fail(f"{name}: cbf-run exited {out.returncode}: {out.stdout[-3000:]}{out.stderr[-3000:]}")
    return out.stdout + out.stderr


def counter(table, node, name):
    m = re.search(rf"^{node} .*\b{name}=(\d+)", table, re.M)
    if not m:
        fail(f"no counter {name} of {node} in: {table}")
    return int(m.group(1))


def check_engine(name, path, group, first, cph, band, got, table, node):
    """The heaps of one X-engine against its file (removed from got), one
    defect at a time: dumps without antennas not sent and counted, then
    frequencies and values, then counters. Returns how many dumps were sent
    whole, sent with an antenna flagged, and not sent."""
    f = h5py.File(path)[group]
    vis, ts, present = f["data"][()], f["timestamp"][()], f["present"][()]
    keys = [[(int(t), first + f0) for f0 in range(0, vis.shape[1], cph)] for t in ts]
    empty = ~present.any(axis=1)
    for d in np.flatnonzero(empty):
        if any(k in got for k in keys[d]):
            fail(f"{name}: dump {ts[d]} has no antenna present but was sent")
    n = counter(table, node, "dumps_not_sent_no_antennas")
    if n != empty.sum():
        fail(f"{name}: {node} counted {n} dumps not sent, the file has {empty.sum()} without antennas")
    heaps = {}
    for d in np.flatnonzero(~empty):
        for f0, key in zip(range(0, vis.shape[1], cph), keys[d]):
            if key not in got:
                fail(f"{name}: heap at timestamp {key[0]}, frequency {key[1]} not received "
                     f"(received: {sorted(k for k in got if k[0] == key[0])})")
            heaps[key], raw = got.pop(key)
            if not np.array_equal(raw, vis[d, f0:f0 + cph]):
                fail(f"{name}: xeng_raw at timestamp {key[0]}, channel {key[1]} differs from the file")
        if not present[d].all() and not (vis[d][..., 0] == MAGIC).any():
            fail(f"{name}: dump {ts[d]} has a flagged antenna but no missing-data value")
    for (t, f0), cnt in heaps.items():
        if cnt % (band // cph) != f0 // cph:
            fail(f"{name}: heap counter {cnt:#x} is not in the slot of channel {f0}")
    full = int(present.all(axis=1).sum())
    return full, int((~empty).sum()) - full, int(empty.sum())


def two_xengines(cbf_run, tmp):
    p = [free_port(), free_port()]
    out = free_port()
    # One dsim per antenna (same seed and signal) so that each loses its own
    # heaps: heap 200 (batch 6, dump 3) only antenna 0's, so that dump goes
    # out with antenna 0 flagged; heap 330 (batch 10, dump 5) both, so that
    # dump has no antenna and is not sent.
    nodes = {f"dsim{a}": {"plugin": "dsim", "params": {
        "antennas": 1, "samples_per_chunk": SPC, "length": 8 * SPC, "seed": 5,
        "noise": 0.05, "tones": [{"frequency": 300e6, "amplitude": 0.2}],
        "missing": [200, 330] if a == 0 else [330]}} for a in range(2)}
    edges = []
    for a in range(2):
        nodes[f"pfb{a}"] = {"plugin": "pfb", "params": {"channels": CHANNELS,
                                                        "spectra_per_buffer": SPECTRA}}
        nodes[f"post{a}"] = {"plugin": "fft_post", "params": {"spectra_per_heap": SPECTRA,
                                                              "gain": [0.5, 0.0]}}
        nodes[f"fsend{a}"] = {"plugin": "sender", "params": {
            "destinations": f"127.0.0.1:{p[0]},127.0.0.1:{p[1]}", "channels_per_heap": PER_X,
            "feng_id": a, "rate_gbps": 0.5}}
        edges += [f"dsim{a}.out -> pfb{a}.in", f"pfb{a}.out -> post{a}.in", f"post{a}.out -> fsend{a}.in"]
    for x in range(2):
        nodes[f"recv{x}"] = {"plugin": "receiver", "params": {
            "address": f"127.0.0.1:{p[x]}", "interface": "127.0.0.1", "stream": "feng",
            "antennas": 2, "channels": PER_X, "first_channel": PER_X * x,
            "total_channels": CHANNELS, "spectra_per_heap": SPECTRA, "batches": 1, "stops": 2,
            "chunks_in_flight": 8, "buffers": 10, "idle_timeout": 20}}
        nodes[f"corr{x}"] = {"plugin": "correlator", "params": {"heap_accumulation_threshold": DUMP}}
        nodes[f"reduce{x}"] = {"plugin": "reducer"}
        nodes[f"xsend{x}"] = {"plugin": "sender", "params": {
            "destinations": f"127.0.0.1:{out}", "channels_per_heap": XCPH, "packet_size": 1024}}
        nodes[f"sink{x}"] = {"plugin": "filesink", "params": {"path": os.path.join(tmp, f"x{x}.h5")}}
        edges += [f"recv{x}.batches -> corr{x}.in", f"corr{x}.out -> reduce{x}.in",
                  f"reduce{x}.out -> xsend{x}.in", f"reduce{x}.out -> sink{x}.in"]
    stream = spead2_stream(out)
    table = run(cbf_run, tmp, "two", {"engine": {"gpu": "auto"}, "nodes": nodes, "edges": edges})
    got, cnts = collect(stream, 2)
    totals = np.zeros(3, int)
    for x in range(2):
        totals += check_engine(f"X-engine {x}", os.path.join(tmp, f"x{x}.h5"), f"reduce{x}",
                               PER_X * x, XCPH, CHANNELS, got, table, f"xsend{x}")
    if len(set(cnts)) != len(cnts):
        fail(f"heap counters repeat across the two X-engines: {sorted(cnts)}")
    if got:
        fail(f"heaps that match no dump of either file: {sorted(got)}")
    if not all(totals):
        fail(f"dumps whole/partial/skipped {totals}: the test must see each kind")
    print(f"ok: 2 X-engines into one spead2 stream: {len(cnts)} heaps, counters distinct, absolute "
          f"frequencies; dumps whole/antenna flagged/not sent: {totals.tolist()}")


def fsim_skip(cbf_run, tmp):
    out = free_port()
    doc = {"engine": {"gpu": "auto"},
           "nodes": {"fsim": {"plugin": "fsim", "params": {
                         "antennas": 3, "channels": 64, "batches": 4, "length": 24,
                         "missing_antennas": [0, 1, 2], "missing_batches": [9]}},
                     "corr": {"plugin": "correlator", "params": {"heap_accumulation_threshold": 4}},
                     "reduce": {"plugin": "reducer"},
                     "send": {"plugin": "sender", "params": {"destinations": f"127.0.0.1:{out}",
                                                             "channels_per_heap": 32}},
                     "sink": {"plugin": "filesink", "params": {"path": os.path.join(tmp, "f.h5")}}},
           "edges": ["fsim.out -> corr.in", "corr.out -> reduce.in", "reduce.out -> send.in",
                     "reduce.out -> sink.in"]}
    stream = spead2_stream(out)
    table = run(cbf_run, tmp, "fsim", doc)
    got, cnts = collect(stream, 1)
    sent, partial, skipped = check_engine("fsim", os.path.join(tmp, "f.h5"), "reduce", 0, 32, 64, got,
                                          table, "send")
    if skipped != 1 or partial or sent < 3 or got:
        fail(f"fsim: {sent} dumps sent, {skipped} not sent, extra heaps {sorted(got)}: want 1 not sent")
    print(f"ok: fsim: the dump with every antenna flagged is not sent and is counted, {sent} others sent")


def refusals(cbf_run, tmp):
    """Counters could repeat across X-engines when ranges do not tile one
    band: the sender refuses to start, saying why."""
    base = {"recv": {"plugin": "receiver", "params": {
                "address": f"127.0.0.1:{free_port()}", "stream": "feng", "antennas": 2,
                "channels": PER_X, "first_channel": PER_X, "total_channels": CHANNELS,
                "spectra_per_heap": SPECTRA}},
            "corr": {"plugin": "correlator", "params": {"heap_accumulation_threshold": DUMP}},
            "reduce": {"plugin": "reducer"},
            "xsend": {"plugin": "sender", "params": {"destinations": f"127.0.0.1:{free_port()}",
                                                     "channels_per_heap": XCPH}}}
    cases = [("total_channels", 0, "total_channels must be the whole band"),
             ("first_channel", 96, "do not tile a 256-channel band from first channel 96")]
    for param, value, why in cases:
        nodes = {k: {"plugin": v["plugin"], "params": dict(v.get("params", {}))} for k, v in base.items()}
        nodes["recv"]["params"][param] = value
        path = os.path.join(tmp, "refuse.yaml")
        with open(path, "w") as f:
            yaml.safe_dump({"engine": {"gpu": "none"}, "nodes": nodes,
                            "edges": ["recv.batches -> corr.in", "corr.out -> reduce.in",
                                      "reduce.out -> xsend.in"]}, f)
        out = subprocess.run([cbf_run, path, "--quiet"], capture_output=True, text=True, timeout=60)
        if out.returncode == 0 or why not in out.stderr + out.stdout:
            fail(f"{param} {value}: exit {out.returncode}, want a refusal saying '{why}': "
                 f"{out.stdout}{out.stderr}")
    print("ok: X-engine ranges that do not tile the band are refused, saying why")


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        fsim_skip(cbf_run, tmp)
        two_xengines(cbf_run, tmp)
        refusals(cbf_run, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
