#!/usr/bin/env python3
"""Beam streams on the wire in katgpucbf's format, with spead2 at the far
end both ways:

1. cbf -> spead2: fsim (4 antennas; antenna 1 flagged in batches 2 and 5)
   -> beamformer (2 beams) -> sender, one
   destination per beam, and the same beams to a filesink (the reference).
   spead2 receives each beam's port as its own stream and must find the
   descriptors (ids, names, bf_raw's shape and dtype), one heap per batch
   with timestamp, frequency (the engine's first channel), beam_ants (4, or
   3 where antenna 1 was flagged) and bf_raw equal to the beamformer's
   output; heap counters all distinct. A second run flags every antenna in
   two batches: those are not sent, and are counted.
2. spead2 -> cbf: a spead2 sender built as katgpucbf's bsend builds its
   streams (one item group, descriptors then data heaps with repeated item
   pointers, a substream per beam) sends random beam heaps with random
   beam_ants, leaving out two heaps and claiming 5 of 4 antennas in a third;
   the receiver (stream beam, one address per beam) -> filesink must hold
   exactly what was sent (data, timestamps, beam_ants per heap), the three
   flagged missing, zero, and counted in flags_missing (the third also in
   heaps_bad). The receiver's beams also go on through a sender to spead2:
   every heap that came, as it came (beam_ants too), and not the others.
3. A sender with a destination count other than the beam count is refused.

usage: beam_wire.py CBF_RUN
"""
import os
import subprocess
import sys
import tempfile
import threading
import time

try:
    import h5py
    import numpy as np
    import spead2
    import spead2.recv
    import spead2.send
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/spead2 not importable ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import bound, fail, free_port, write_yaml  # noqa: E402

ANTS, CHANNELS, SPECTRA, BATCHES, BUFFERS = 4, 64, 256, 4, 4
FLAVOUR = spead2.Flavour(4, 64, 48, 0)


def counter(log, name):
    got = [int(w.split("=")[1]) for w in log.split() if w.startswith(name + "=")]
    if not got:
        fail(f"no counter {name} in the log: {log}")
    return got[-1]


def spead2_stream(port):
    """One beam's stream: it ends at the sender's stop (20 s at most)."""
    s = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=8),
                           spead2.recv.RingStreamConfig(heaps=256))
    s.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=8 << 20)
    return s


def collect(stream, cnts):
    """A beam stream's data heaps as {timestamp: (frequency, beam_ants,
    bf_raw)} and its item group (the descriptors), to the sender's stop;
    every heap counter appended to cnts."""
    timer = threading.Timer(20, stream.stop)
    timer.start()
    ig, got = spead2.ItemGroup(), {}
    for heap in stream:
        cnts.append(heap.cnt)
        if "bf_raw" in ig.update(heap):
            got[ig["timestamp"].value] = (ig["frequency"].value, ig["beam_ants"].value,
                                          ig["bf_raw"].value.copy())
    timer.cancel()
    return got, ig


def run_sender(cbf_run, tmp, name, doc):
    """cbf-run of doc to its end: its log."""
    yml = os.path.join(tmp, name + ".yaml")
    write_yaml(yml, doc)
    tx = subprocess.run([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        timeout=120)
    if tx.returncode:
        fail(f"beam sender exited {tx.returncode}: {tx.stdout}")
    return tx.stdout


def cbf_to_spead2(cbf_run, tmp):
    ports = [free_port(), free_port()]
    streams = [spead2_stream(p) for p in ports]
    h5 = os.path.join(tmp, "beams.h5")
    doc = {"engine": {"gpu": "auto"},
           "nodes": {"fsim": {"plugin": "fsim", "params": {
                         "antennas": ANTS, "channels": CHANNELS, "spectra_per_heap": SPECTRA,
                         "batches": BATCHES, "length": BATCHES * BUFFERS, "seed": 3,
                         "missing_antennas": [1], "missing_batches": [2, 5]}},
                     "beams": {"plugin": "beamformer", "params": {"beams": [{"pol": 0}, {"pol": 1}]}},
                     "send": {"plugin": "sender", "params": {
                         "destinations": ",".join(f"127.0.0.1:{p}" for p in ports), "rate_gbps": 0.5}},
                     "sink": {"plugin": "filesink", "params": {"path": h5}}},
           "edges": ["fsim.out -> beams.in", "beams.out -> send.in", "beams.out -> sink.in"]}
    run_sender(cbf_run, tmp, "tx", doc)
    f = h5py.File(h5)["beams"]
    data, ts0 = f["data"][()], f["timestamp"][()]
    ants = f["beam_ants"][()]
    step = int(f.attrs["spectra_per_heap"] * f.attrs["samples_between_spectra"])
    want_ants = np.full((BUFFERS, BATCHES), ANTS)
    want_ants[0, 2] = want_ants[1, 1] = ANTS - 1
    if not np.array_equal(ants[..., 0], np.repeat(want_ants[..., None], 2, axis=-1)):
        fail(f"file's beam_ants {ants[..., 0].tolist()} is not 4, with 3 in batches 2 and 5")
    cnts = []
    for beam, s in enumerate(streams):
        got, ig = collect(s, cnts)
        for name, ident in (("timestamp", 0x1600), ("frequency", 0x4103), ("beam_ants", 0x5004),
                            ("bf_raw", 0x5000)):
            if name not in ig or ig[name].id != ident:
                fail(f"beam {beam}: descriptor of {name} (0x{ident:x}) not received: {list(ig.keys())}")
        if ig["bf_raw"].shape != (CHANNELS, SPECTRA, 2) or ig["bf_raw"].dtype != np.int8:
            fail(f"beam {beam}: bf_raw described as {ig['bf_raw'].shape} {ig['bf_raw'].dtype}")
        want = {int(ts0[i]) + bt * step: (i, bt) for i in range(BUFFERS) for bt in range(BATCHES)}
        if sorted(got) != sorted(want):
            fail(f"beam {beam}: heaps at {sorted(got)}, expected {sorted(want)}")
        for t, (freq, n, raw) in got.items():
            i, bt = want[t]
            if freq != 0 or n != want_ants[i, bt] or not np.array_equal(raw, data[i, bt, beam]):
                fail(f"beam {beam}, timestamp {t}: frequency {freq}, beam_ants {n} (expected "
                     f"{want_ants[i, bt]}), bf_raw equal: {np.array_equal(raw, data[i, bt, beam])}")
    if len(set(cnts)) != len(cnts):
        fail(f"heap counters repeat: {sorted(cnts)}")
    print(f"ok: cbf -> spead2: {BUFFERS * BATCHES} heaps per beam, descriptors, beam_ants and bf_raw "
          f"as the beamformer made them")


def no_antenna_batch(cbf_run, tmp):
    """Every antenna flagged in batches 1 and 6: those are not sent, counted."""
    port = free_port()
    s = spead2_stream(port)
    doc = {"engine": {"gpu": "auto"},
           "nodes": {"fsim": {"plugin": "fsim", "params": {
                         "antennas": 2, "channels": CHANNELS, "spectra_per_heap": SPECTRA,
                         "batches": BATCHES, "length": 2 * BATCHES,
                         "missing_antennas": [0, 1], "missing_batches": [1, 6]}},
                     "beams": {"plugin": "beamformer", "params": {"beams": [{"pol": 0}]}},
                     "send": {"plugin": "sender", "params": {"destinations": f"127.0.0.1:{port}"}}},
           "edges": ["fsim.out -> beams.in", "beams.out -> send.in"]}
    log = run_sender(cbf_run, tmp, "none", doc)
    ts = list(collect(s, [])[0])
    batches = sorted(t // (SPECTRA * 2 * CHANNELS) for t in ts)   # fsim: 2 x channels between spectra
    if len(ts) != 2 * BATCHES - 2 or 1 in batches or 6 in batches:
        fail(f"heaps of batches {batches} sent; expected all but 1 and 6")
    if counter(log, "heaps_not_sent_missing") != 2:
        fail(f"heaps_not_sent_missing is not 2: {log}")
    print("ok: batches with no antenna present are not sent, and counted")


def spead2_to_cbf(cbf_run, tmp):
    ports = [free_port(), free_port()]
    spb = 128
    step = SPECTRA * spb
    t0 = 7 * BATCHES * step   # chunk-aligned, not 0
    rng = np.random.default_rng(17)
    data = rng.integers(-127, 128, size=(BUFFERS, BATCHES, 2, CHANNELS, SPECTRA, 2), dtype=np.int8)
    ants = rng.integers(1, ANTS + 1, size=(BUFFERS, BATCHES, 2))
    lost = {(1, 1, 1), (2, 3, 0)}   # (buffer, batch, beam) never sent
    bad = (3, 2, 1)                 # sent claiming more antennas than the array has
    h5 = os.path.join(tmp, "rx.h5")
    # The received beams also go on through a sender (a relay), to spead2:
    # the sender reads the network form's flags and beam_ants.
    relay = [free_port(), free_port()]
    relayed = [spead2_stream(p) for p in relay]
    doc = {"engine": {"gpu": "none"},
           "nodes": {"recv": {"plugin": "receiver", "params": {
                         "stream": "beam", "address": ",".join(f"127.0.0.1:{p}" for p in ports),
                         "antennas": ANTS, "channels": CHANNELS, "spectra_per_heap": SPECTRA,
                         "samples_between_spectra": spb, "batches": BATCHES, "stops": 2,
                         # Each beam has its own socket and thread, which a
                         # loaded machine can hold back by chunks: the
                         # window holds the whole run, so no heap is late.
                         "chunks_in_flight": BUFFERS, "buffers": BUFFERS + 2, "idle_timeout": 10}},
                     "sink": {"plugin": "filesink", "params": {"path": h5}},
                     "send": {"plugin": "sender", "params": {
                         "destinations": ",".join(f"127.0.0.1:{p}" for p in relay)}}},
           "edges": ["recv.beams -> sink.in", "recv.beams -> send.in"]}
    yml = os.path.join(tmp, "rx.yaml")
    write_yaml(yml, doc)
    rx = subprocess.Popen([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 30
    while not all(bound(p) for p in ports):
        if rx.poll() is not None or time.monotonic() > deadline:
            fail(f"receiver did not start: {rx.communicate()[0]}")
        time.sleep(0.01)
    # As katgpucbf's bsend: one stream, a substream per beam, one item group.
    stream = spead2.send.UdpStream(spead2.ThreadPool(), [("127.0.0.1", p) for p in ports],
                                   spead2.send.StreamConfig(rate=100e6, max_packet_size=8872))
    ig = spead2.send.ItemGroup(flavour=FLAVOUR)
    ig.add_item(0x4103, "frequency", "Value of the first channel in collections stored here.",
                shape=[], format=[("u", 48)])
    ig.add_item(0x1600, "timestamp", "Timestamp", shape=[], format=[("u", 48)])
    ig.add_item(0x5004, "beam_ants", "Count of antennas included in the beam sum.", shape=[],
                format=[("u", 48)])
    ig.add_item(0x5000, "bf_raw", "Beamformer output for frequency-domain beam.",
                shape=(CHANNELS, SPECTRA, 2), dtype=np.int8)
    for beam in range(2):
        stream.send_heap(ig.get_heap(descriptors="all", data="none"), substream_index=beam)
    for i in range(BUFFERS):
        for bt in range(BATCHES):
            for beam in range(2):
                if (i, bt, beam) in lost:
                    continue
                ig["frequency"].value = 0
                ig["timestamp"].value = t0 + (i * BATCHES + bt) * step
                ig["beam_ants"].value = ANTS + 1 if (i, bt, beam) == bad else int(ants[i, bt, beam])
                ig["bf_raw"].value = data[i, bt, beam]
                heap = ig.get_heap(descriptors="none", data="all")
                heap.repeat_pointers = True
                stream.send_heap(heap, substream_index=beam)
    for beam in range(2):
        stream.send_heap(ig.get_end(), substream_index=beam)
    log = rx.communicate(timeout=60)[0]
    if rx.returncode:
        fail(f"receiver exited {rx.returncode}: {log}")
    f = h5py.File(h5)["recv"]
    got, present, got_ants = f["data"][()], f["present"][()], f["beam_ants"][()]
    ts = f["timestamp"][()]
    if not np.array_equal(ts, t0 + np.arange(BUFFERS) * BATCHES * step):
        fail(f"chunk timestamps {ts.tolist()}")
    want_present = np.ones((BUFFERS, BATCHES, 2), np.uint8)
    lost.add(bad)   # refused by the receiver: as good as lost
    for i, bt, beam in lost:
        want_present[i, bt, beam] = 0
        data[i, bt, beam] = 0
        ants[i, bt, beam] = 0
    if not np.array_equal(present.reshape(want_present.shape), want_present):
        fail(f"presence flags {present.tolist()}: {log}")
    if not np.array_equal(got, data):
        fail(f"received beams differ from those sent in {(got != data).any(axis=(3, 4, 5)).sum()} heaps")
    if not np.array_equal(got_ants[..., 0], ants):
        fail(f"beam_ants {got_ants[..., 0].tolist()} != sent {ants.tolist()}")
    kind, axis = (f.attrs[k].decode() if isinstance(f.attrs[k], bytes) else f.attrs[k]
                  for k in ("type", "present_axis"))
    if kind != "cbf.beam.batch" or axis != "batch_beam":
        fail(f"group type {kind}, present_axis {axis}")
    if counter(log, "flags_missing") != len(lost) or counter(log, "heaps_bad") != 1:
        fail(f"flags_missing {counter(log, 'flags_missing')} (expected {len(lost)}), heaps_bad (1) "
             f"{counter(log, 'heaps_bad')}: {log}")
    for beam, stream in enumerate(relayed):
        got_relay = collect(stream, [])[0]
        want = {t0 + (i * BATCHES + bt) * step: (i, bt) for i in range(BUFFERS) for bt in range(BATCHES)
                if (i, bt, beam) not in lost}
        if sorted(got_relay) != sorted(want):
            fail(f"relayed beam {beam}: heaps at {sorted(got_relay)}, expected {sorted(want)}")
        for t, (freq, n, raw) in got_relay.items():
            i, bt = want[t]
            if freq != 0 or n != ants[i, bt, beam] or not np.array_equal(raw, data[i, bt, beam]):
                fail(f"relayed beam {beam}, timestamp {t}: frequency {freq}, beam_ants {n} (sent "
                     f"{ants[i, bt, beam]}), bf_raw equal: {np.array_equal(raw, data[i, bt, beam])}")
    print(f"ok: spead2 -> cbf: {BUFFERS * BATCHES * 2 - len(lost)} heaps recorded as sent, beam_ants "
          f"per heap kept, 2 left out and 1 with beam_ants beyond the array flagged, zero and counted; "
          f"relayed by cbf's sender as received, without the lost ones")


def refused(cbf_run, tmp):
    doc = {"engine": {"gpu": "none"},
           "nodes": {"fsim": {"plugin": "fsim", "params": {"length": 8}},
                     "beams": {"plugin": "beamformer", "params": {"beams": [{"pol": 0}, {"pol": 1}]}},
                     "send": {"plugin": "sender", "params": {"destinations": "127.0.0.1:9"}}},
           "edges": ["fsim.out -> beams.in", "beams.out -> send.in"]}
    yml = os.path.join(tmp, "refuse.yaml")
    write_yaml(yml, doc)
    r = subprocess.run([cbf_run, yml], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=30)
    if r.returncode == 0 or "1 destinations for 2 beams" not in r.stdout or "refuse.yaml:" not in r.stdout:
        fail(f"one destination for two beams: exit {r.returncode}, {r.stdout}")
    print("ok: a destination count other than the beam count is refused, naming the YAML place")


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        cbf_to_spead2(cbf_run, tmp)
        no_antenna_batch(cbf_run, tmp)
        spead2_to_cbf(cbf_run, tmp)
        refused(cbf_run, tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
