#!/usr/bin/env python3
"""F-engine stream: dsim -> pfb -> fft_post -> sender (heaps shared round
robin by two interfaces, 127.0.0.1 and 127.0.0.2), checked two ways
against dsim -> pfb -> fft_post -> filesink (CPU path, same seed):
  1. spead2 receives the heaps and decodes every item: descriptors (names,
     shapes, dtypes), timestamps, feng_id, frequency and feng_raw values;
  2. our receiver (stream: feng) assembles them into an X-engine batch in a
     second cbf-run process and filesink writes it: same bytes, the same
     batch flagged; descriptors resent periodically arrive more than once.

usage: feng_stream.py CBF_RUN
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

CHANNELS, SPECTRA, CPH = 256, 256, 64
MISSING_HEAP = 100   # one digitiser heap lost: the batches it touches must not be sent
SPC = 262144
LENGTH = 4 * SPC


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from loopback import fail, free_port, start_receiver  # noqa: E402


def feng(sink):
    return {"engine": {"gpu": "none"},
            "nodes": {"dsim": {"plugin": "dsim", "params": {
                          "antennas": 1, "samples_per_chunk": SPC, "length": LENGTH, "seed": 3,
                          "missing": [MISSING_HEAP],
                          "noise": 0.05, "tones": [{"frequency": 300e6, "amplitude": 0.2}]}},
                      "pfb": {"plugin": "pfb", "params": {"channels": CHANNELS, "taps": 4,
                                                          "spectra_per_buffer": SPECTRA}},
                      "fft_post": {"plugin": "fft_post", "params": {"spectra_per_heap": SPECTRA,
                                                                    "gain": [0.5, 0.0]}},
                      "sink": sink},
            "edges": ["dsim.out -> pfb.in", "pfb.out -> fft_post.in", "fft_post.out -> sink.in"]}


def run(cbf_run, tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        ref_path = os.path.join(tmp, "ref.h5")
        subprocess.run([cbf_run, run(cbf_run, tmp, "ref", feng(
            {"plugin": "filesink", "params": {"path": ref_path}})), "--quiet"], check=True, timeout=120)
        ref = h5py.File(ref_path)["fft_post"]
        ref_data, ref_ts = ref["data"][()], ref["timestamp"][()]   # [buf][batch][chan][spec][pol][2]
        ref_present = ref["present"][()]                           # [buf][batch]
        if ref_present.all():
            fail("the reference has no flagged batch: the test would not cover it")
        step = 2 * CHANNELS * SPECTRA

        # 1. spead2 as the receiver.
        port = free_port()
        stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=8))
        stream.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=16 << 20)
        # Two interfaces (two loopback addresses): heaps alternate between them.
        sender = {"plugin": "sender", "params": {"destinations": f"127.0.0.1:{port}",
                                                 "interface": "127.0.0.1,127.0.0.2",
                                                 "channels_per_heap": CPH, "rate_gbps": 0.5}}
        subprocess.run([cbf_run, run(cbf_run, tmp, "tx", feng(sender)), "--quiet"], check=True, timeout=120)
        ig = spead2.ItemGroup()
        got = {}
        for heap in stream:
            updated = ig.update(heap)
            if "feng_raw" in updated:
                got[(ig["timestamp"].value, ig["frequency"].value)] = (ig["feng_id"].value,
                                                                      ig["feng_raw"].value.copy())
        item = ig["feng_raw"]
        if item.id != 0x4300 or tuple(item.shape) != (CPH, SPECTRA, 2, 2) or item.dtype != np.int8:
            fail(f"feng_raw descriptor: id {item.id:#x} shape {item.shape} dtype {item.dtype}")
        for name, iid in [("timestamp", 0x1600), ("feng_id", 0x4101), ("frequency", 0x4103)]:
            if ig[name].id != iid:
                fail(f"{name} has id {ig[name].id:#x}")
        n_batches = ref_data.shape[1]
        want = int(ref_present.sum()) * (CHANNELS // CPH)
        if len(got) != want:
            fail(f"spead2 decoded {len(got)} heaps, expected {want} (flagged batches are not sent)")
        for b, ts0 in enumerate(ref_ts):
            for k in range(n_batches):
                for f0 in range(0, CHANNELS, CPH):
                    key = (int(ts0) + k * step, f0)
                    if not ref_present[b, k]:
                        if key in got:
                            fail(f"a flagged batch was sent (timestamp {key[0]})")
                        continue
                    fid, raw = got[key]
                    if fid != 0 or not np.array_equal(raw, ref_data[b, k, f0:f0 + CPH]):
                        fail(f"heap at timestamp {ts0 + k * step}, channel {f0} differs")
        print(f"ok: spead2 decoded {len(got)} F-engine heaps, every item and value as written")

        # 2. our receiver as the X-engine's input.
        port = free_port()
        sender["params"]["destinations"] = f"127.0.0.1:{port}"
        sender["params"]["descriptor_interval"] = 1e-6   # descriptors again before every buffer
        rx_path = os.path.join(tmp, "rx.h5")
        rx = {"engine": {"gpu": "none"},
              "nodes": {"recv": {"plugin": "receiver", "params": {
                  "address": f"127.0.0.1:{port}", "stream": "feng", "antennas": 1,
                  "channels": CHANNELS, "channels_per_heap": CPH, "spectra_per_heap": SPECTRA,
                  "batches": n_batches, "idle_timeout": 10}},
                        "sink": {"plugin": "filesink", "params": {"path": rx_path}}},
              "edges": ["recv.batches -> sink.in"]}
        proc = start_receiver(cbf_run, tmp, "rx", port, rx)
        subprocess.run([cbf_run, run(cbf_run, tmp, "tx2", feng(sender)), "--quiet"], check=True, timeout=120)
        log = proc.communicate(timeout=60)[0]
        if proc.returncode:
            fail(f"receiver exited {proc.returncode}: {log}")
        seen = [int(w) for w in log.split("descriptor heaps seen")[0].split()[-1:]]
        if not seen or seen[0] < 2:
            fail(f"periodic descriptors: the receiver saw {seen}")
        out = h5py.File(rx_path)["recv"]
        data = out["data"][()]                                  # [buf][batch][ant][chan][spec][pol][2]
        present = out["present"][()]                            # [buf][batch x antenna]
        if not np.array_equal(out["timestamp"][()], ref_ts) or not np.array_equal(present, ref_present):
            fail(f"timestamps {out['timestamp'][()]} vs {ref_ts}, present {present} vs {ref_present}")
        mask = ref_present.astype(bool)
        if not np.array_equal(data[:, :, 0][mask], ref_data[mask]) or data[:, :, 0][~mask].any():
            fail("X-engine batches differ from the F-engine output (or a missing batch is not zero)")
        print(f"ok: receiver assembled {data.shape[0]} X-engine chunks equal to the F-engine output, "
              f"{int((~mask).sum())} batches flagged as at the source")
    return 0


if __name__ == "__main__":
    sys.exit(main())
