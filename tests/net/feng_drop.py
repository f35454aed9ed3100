#!/usr/bin/env python3
"""Loss injection on multi-packet heaps, end to end: the F-engine stream
(dsim -> pfb -> fft_post -> sender, 8 packets per heap) is captured into a
pcap, replayed through the receiver (stream feng, an X-engine's input) with
`drop_rate` R and `drop_seed`; this script predicts exactly which packets
the receiver drops (its generator over the data packets in capture order,
written again here from receiver.c) and so which (batch, antenna) entries
lose a heap. The receiver's output must flag exactly those (and the batch
the F-engine itself flagged), zero-filled, and every other entry must equal
the F-engine's own output (dsim -> pfb -> fft_post -> filesink); within a
flagged entry the lost heap's channels are zero and its other heaps intact.

usage: feng_drop.py CBF_RUN RATE
"""
import os
import struct
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy/yaml not importable ({e})")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import feng_stream  # noqa: E402
from feng_stream import CHANNELS, CPH, SPECTRA, feng  # noqa: E402
from loopback import write_yaml  # noqa: E402
from pcap_replay import capture_stream, write_pcap  # noqa: E402

SEED = 7
feng_stream.LENGTH = 16 * feng_stream.SPC   # about 30 batches sent, 32 packets each: 1% loss hits a few
MASK64 = (1 << 64) - 1


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def items(p):
    """{id: (immediate, value)} of a SPEAD-64-48 packet."""
    (n,) = struct.unpack_from(">H", p, 6)
    out = {}
    for i in range(n):
        (v,) = struct.unpack_from(">Q", p, 8 + 8 * i)
        out.setdefault((v >> 48) & 0x7FFF, (bool(v >> 63), v & ((1 << 48) - 1)))
    return out


def predict_drops(packets, rate, seed):
    """The receiver's drop_test (receiver.c) over packets in order: data
    packets only (no stream control, no descriptor) draw from a xorshift
    seeded seed * 0x9e3779b97f4a7c15 + 1 + 1 (the first worker)."""
    rng = (seed * 0x9E3779B97F4A7C15 + 2) & MASK64
    dropped = []
    for p in packets:
        it = items(p)
        if 6 in it or 5 in it:
            continue
        rng ^= (rng << 13) & MASK64
        rng ^= rng >> 7
        rng ^= (rng << 17) & MASK64
        if (rng >> 11) * 2.0 ** -53 < rate:
            dropped.append(it[1][1])   # heap counter
    return dropped


def main():
    cbf_run, rate = sys.argv[1], float(sys.argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "ref.h5")
        write_yaml(os.path.join(tmp, "ref.yaml"), feng({"plugin": "filesink", "params": {"path": ref_path}}))
        subprocess.run([cbf_run, os.path.join(tmp, "ref.yaml"), "--quiet"], check=True, timeout=120)
        ref = h5py.File(ref_path)["fft_post"]
        ref_data, ref_ts, ref_present = ref["data"][()], ref["timestamp"][()], ref["present"][()]
        n_bufs, n_batches = ref_present.shape
        step = 2 * CHANNELS * SPECTRA

        def sender(port):
            return feng({"plugin": "sender", "params": {"destinations": f"127.0.0.1:{port}",
                                                        "channels_per_heap": CPH, "rate_gbps": 0.3}})
        packets, port = capture_stream(cbf_run, tmp, sender)
        heaps = {}
        for p in packets:
            it = items(p)
            if 0x1600 in it and 0x4300 in it:
                heaps[it[1][1]] = (it[0x1600][1], it[0x4103][1])   # counter -> timestamp, first channel
        sent = int(ref_present.sum()) * (CHANNELS // CPH)
        if len(heaps) != sent:
            fail(f"captured {len(heaps)} F-engine heaps of {sent} sent: the capture lost packets")
        expect = ref_present.copy()
        want = ref_data * ref_present[:, :, None, None, None, None].astype(ref_data.dtype)
        dropped = predict_drops(packets, rate, SEED)
        for cnt in dropped:
            ts, f0 = heaps[cnt]
            batch = (ts - int(ref_ts[0])) // step
            expect[batch // n_batches, batch % n_batches] = 0
            want[batch // n_batches, batch % n_batches, f0:f0 + CPH] = 0   # the heap's channels
        lost = int(ref_present.sum() - expect.sum())
        if lost == 0 or expect.sum() == 0:
            fail(f"rate {rate} seed {SEED}: {lost} entries hit of {int(ref_present.sum())}; pick another seed")
        cap = os.path.join(tmp, "feng.pcap")
        write_pcap(cap, packets, port)
        out_path = os.path.join(tmp, "rx.h5")
        rx = {"engine": {"gpu": "none"},
              "nodes": {"recv": {"plugin": "receiver", "params": {
                  "source": "pcap", "pcap": cap, "address": f"127.0.0.1:{port}", "stream": "feng", "antennas": 1,
                  "channels": CHANNELS, "channels_per_heap": CPH, "spectra_per_heap": SPECTRA,
                  "batches": int(n_batches), "drop_rate": rate, "drop_seed": SEED}},
                        "sink": {"plugin": "filesink", "params": {"path": out_path}}},
              "edges": ["recv.batches -> sink.in"]}
        write_yaml(os.path.join(tmp, "rx.yaml"), rx)
        r = subprocess.run([cbf_run, os.path.join(tmp, "rx.yaml")], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120)
        if r.returncode:
            fail(f"replay exited {r.returncode}: {r.stdout}")
        told = [int(w.split("=")[1]) for w in r.stdout.split() if w.startswith("packets_dropped_test=")]
        if told != [len(dropped)]:
            fail(f"receiver dropped {told} packets, predicted {len(dropped)}: {r.stdout}")
        out = h5py.File(out_path)["recv"]
        present, data = out["present"][()], out["data"][()]
        if not np.array_equal(out["timestamp"][()], ref_ts):
            fail(f"timestamps {out['timestamp'][()]} vs {ref_ts}")
        if not np.array_equal(present, expect):
            fail(f"flags {present.tolist()}, expected {expect.tolist()}")
        # Entries not hit equal the F-engine's output; in a hit entry the
        # lost heap's channels are zero and its other heaps are there.
        if not np.array_equal(data[:, :, 0], want):
            bad = np.argwhere((data[:, :, 0] != want).any(axis=(2, 3, 4, 5)))
            fail(f"(buffer, batch) entries differ from the F-engine output with lost heaps zeroed: {bad.tolist()}")
        print(f"ok: drop {rate:.0%}: {len(dropped)} of {len(packets)} packets dropped, exactly the "
              f"{lost} (batch, antenna) entries they belong to flagged, the other "
              f"{int(expect.sum())} identical")
    return 0


if __name__ == "__main__":
    sys.exit(main())
