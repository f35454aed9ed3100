#!/usr/bin/env python3
"""digitiser_status (SPEAD item 0x3102) end to end.

dsim makes a signal that clips (two tones whose sum passes full scale,
antenna 1 delayed, a heap of one input flagged missing); this script
computes, from a float64 model of that signal written here, how many
samples of every heap clip. Then:

1. spead2 receives dsim -> sender: every heap's digitiser_status must hold
   that count in bits 47:32 and bit 1 set exactly when it is non-zero
   (MeerKAT's digitiser ICD, as katgpucbf's dsim and F-engine use it);
   the missing heap is not sent.
2. dsim -> sender | receiver -> filesink: the file's aux (one uint32 per heap,
   [antenna][pol][heap]) must equal the same counts, 0 for the missing heap,
   and the receiver's counter digitiser_clipped_samples their sum.

usage: dig_status.py CBF_RUN
"""
import os
import subprocess
import sys
import tempfile

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
from loopback import fail, free_port, start_receiver  # noqa: E402

SPC = 65536
CHUNKS = 4
HEAP = 4096
BITS = 8
FS_HZ = 1712e6
# Two tones 80 kHz apart beat with a period of 5.2 heaps: the sum passes
# full scale (1.2) near the beat's peaks and stays inside it between them.
TONES = [{"frequency": 214.0e6, "amplitude": 0.6, "phase_x": 0.0, "phase_y": 1.0},
         {"frequency": 214.08e6, "amplitude": 0.6, "phase_x": 0.3, "phase_y": 0.0}]
DELAYS = [0.0, 3.7]
MISSING_HEAP, MISSING_INPUT = 5, 1


def write(tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def expected_clips():
    """[input][heap] clipped samples, from the signal in float64: a sample
    clips when its value rounded to nearest leaves [-2^(b-1), 2^(b-1) - 1].
    Thousands of samples clip; only a
    value within ~1e-9 of a rounding boundary could differ from dsim's
    (table-based) arithmetic, which has no measurable chance here."""
    full = 2 ** (BITS - 1) - 1
    t = np.arange(CHUNKS * SPC, dtype=np.float64)
    out = np.zeros((2 * len(DELAYS), CHUNKS * SPC // HEAP), dtype=np.int64)
    for a, d in enumerate(DELAYS):
        for p in range(2):
            v = np.zeros_like(t)
            for tone in TONES:
                phase = tone["phase_x"] if p == 0 else tone["phase_y"]
                v += tone["amplitude"] * np.cos(2 * np.pi * tone["frequency"] * (t - d) / FS_HZ + phase)
            r = np.rint(v * full)
            clipped = (r > full) | (r < -full - 1)
            out[2 * a + p] = clipped.reshape(-1, HEAP).sum(axis=1)
    out[MISSING_INPUT, MISSING_HEAP] = 0
    return out


def sender_doc(port):
    return {"engine": {"gpu": "none"},
            "nodes": {"dsim": {"plugin": "dsim", "params": {
                          "antennas": len(DELAYS), "bits": BITS, "samples_per_chunk": SPC,
                          "length": CHUNKS * SPC, "tones": TONES, "noise": 0.0, "delays": DELAYS,
                          "missing": [MISSING_HEAP], "missing_inputs": [MISSING_INPUT]}},
                      "send": {"plugin": "sender", "params": {
                          "destinations": f"127.0.0.1:{port}", "interface": "127.0.0.1",
                          "rate_gbps": 0.5}}},
            "edges": ["dsim.out -> send.in"]}


def check_spead2(cbf_run, tmp, want):
    port = free_port()
    stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=16),
                                spead2.recv.RingStreamConfig(heaps=4096))
    stream.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=8 << 20)
    subprocess.run([cbf_run, write(tmp, "tx-spead2", sender_doc(port)), "--quiet"], check=True,
                   timeout=120)
    got = {}
    for heap in stream:
        items = {it.id: it for it in heap.get_items()}
        if 0x3300 not in items:
            continue   # descriptors
        ts, inp = items[0x1600].immediate_value, items[0x3101].immediate_value
        got[(inp, ts // HEAP)] = items[0x3102].immediate_value
    if len(got) != want.size - 1 or (MISSING_INPUT, MISSING_HEAP) in got:
        fail(f"spead2 received {len(got)} data heaps, expected {want.size - 1} (one missing)")
    for (inp, h), status in got.items():
        count, flag = (status >> 32) & 0xFFFF, (status >> 1) & 1
        if count != want[inp, h] or flag != (want[inp, h] > 0) or status & ~((0xFFFF << 32) | 2):
            fail(f"input {inp} heap {h}: digitiser_status {status:#x}, expected count "
                 f"{want[inp, h]} << 32 and the flag bit")
    print(f"ok: spead2 saw {len(got)} heaps' digitiser_status: saturation count and flag as modelled "
          f"({int((want > 0).sum())} heaps clip, {int(want.sum())} samples)")


def check_receiver(cbf_run, tmp, want):
    port = free_port()
    path = os.path.join(tmp, "rx.h5")
    rx = {"engine": {"gpu": "none"},
          "nodes": {"recv": {"plugin": "receiver", "params": {
                        "address": f"127.0.0.1:{port}", "antennas": len(DELAYS), "bits": BITS,
                        "samples_per_chunk": SPC, "idle_timeout": 10}},
                    "sink": {"plugin": "filesink", "params": {"path": path}}},
          "edges": ["recv.out -> sink.in"]}
    proc = start_receiver(cbf_run, tmp, "rx", port, rx)
    subprocess.run([cbf_run, write(tmp, "tx-rx", sender_doc(port)), "--quiet"], check=True,
                   timeout=120)
    log = proc.communicate(timeout=60)[0]
    if proc.returncode:
        fail(f"receiver exited {proc.returncode}: {log}")
    g = h5py.File(path)["recv"]
    layout = g.attrs["aux_layout"]
    layout = layout.decode() if isinstance(layout, bytes) else layout
    if layout != "u32[antenna][pol][heap] clipped":
        fail(f"aux_layout {layout!r}")
    aux = g["aux"][()]
    if aux.shape[0] != CHUNKS:
        fail(f"{aux.shape[0]} chunks in the file, expected {CHUNKS}")
    heaps = SPC // HEAP
    # [chunk][input][heap] -> [input][chunk x heaps + heap]
    got = aux.view("<u4").reshape(CHUNKS, 2 * len(DELAYS), heaps).transpose(1, 0, 2).reshape(want.shape)
    present = g["present"][()].reshape(CHUNKS, 2 * len(DELAYS), heaps).transpose(1, 0, 2).reshape(want.shape)
    if present[MISSING_INPUT, MISSING_HEAP] or present.sum() != want.size - 1:
        fail(f"presence: {int(present.sum())} of {want.size} heaps, the missing one present "
             f"{bool(present[MISSING_INPUT, MISSING_HEAP])}")
    if not np.array_equal(got, want):
        bad = np.argwhere(got != want)
        fail(f"{len(bad)} heaps' clip counts differ, first {bad[0]}: {got[tuple(bad[0])]} != "
             f"{want[tuple(bad[0])]}")
    told = [int(w.split("=")[1]) for w in log.split() if w.startswith("digitiser_clipped_samples=")]
    if told != [int(want.sum())]:
        fail(f"digitiser_clipped_samples {told}, expected {int(want.sum())}")
    print(f"ok: the receiver's chunks carry every heap's clip count ({int(want.sum())} samples), "
          f"counter digitiser_clipped_samples agrees")


def main():
    cbf_run = sys.argv[1]
    want = expected_clips()
    if not (want > 0).any() or (want == 0).sum() < 2:
        fail("the test signal should clip in some heaps and not in others")
    with tempfile.TemporaryDirectory() as tmp:
        check_spead2(cbf_run, tmp, want)
        check_receiver(cbf_run, tmp, want)
    return 0


if __name__ == "__main__":
    sys.exit(main())
