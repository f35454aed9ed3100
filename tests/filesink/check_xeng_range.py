#!/usr/bin/env python3
"""An X-engine that holds a channel range, fed over loopback by real
F-engines, as the array's second X-engine is: one cbf-run process makes
two antennas' F-engine heaps (dsim delays antenna 1 by 1.25 samples;
channel range 0 goes to a socket nobody reads, range 1, channels 128-255,
to the X-engine); a second receives them (first_channel 128 of 256) and
writes visibilities with filesink. The file must say both the band's 256
channels and the 128 it holds from channel 128, with their frequencies;
scripts/xeng-phases.py must find the tone's channel (180) at index 52 and
its baseline phase where the delay puts it; scripts/cbf-describe must say
it all in words.

usage: check_xeng_range.py CBF_RUN
Exit 77 (skipped) without h5py/numpy/yaml."""
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
    import yaml
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
FS, CHANNELS, FIRST, HELD = 1712e6, 256, 128, 128
K = 180                                   # the tone's channel, in the held range
TONE = K * FS / (2 * CHANNELS)            # channel-centred: no leakage into the phase
DELAYS = [0.0, 1.25]
LABELS = ["m000v", "m000h", "m001v", "m001h"]
DUMP, SPECTRA = 4, 256


sys.path.insert(0, os.path.join(ROOT, "tests", "net"))
from loopback import bound, fail, free_port  # noqa: E402


def fengines(dests):
    nodes = {"dsim": {"plugin": "dsim", "params": {
        "antennas": 2, "samples_per_chunk": 262144, "length": 10 * DUMP * SPECTRA * 2 * CHANNELS,
        "seed": 7, "noise": 0.05, "delays": DELAYS, "tones": [{"frequency": TONE, "amplitude": 0.2}]}}}
    edges = []
    for a in range(2):
        nodes[f"pfb{a}"] = {"plugin": "pfb", "params": {"channels": CHANNELS, "taps": 4, "antenna": a,
                                                       "spectra_per_buffer": SPECTRA}}
        nodes[f"post{a}"] = {"plugin": "fft_post", "params": {"spectra_per_heap": SPECTRA,
                                                             "gain": [0.05, 0.0]}}
        nodes[f"send{a}"] = {"plugin": "sender", "params": {
            "destinations": dests, "channels_per_heap": HELD, "rate_gbps": 0.5}}
        edges += [f"dsim.out -> pfb{a}.in", f"pfb{a}.out -> post{a}.in", f"post{a}.out -> send{a}.in"]
    return {"engine": {"gpu": "none"}, "nodes": nodes, "edges": edges}


def xengine(port, path):
    return {"engine": {"gpu": "none"},
            "nodes": {"recv": {"plugin": "receiver", "params": {
                          "address": f"127.0.0.1:{port}", "stream": "feng", "antennas": 2,
                          "channels": HELD, "first_channel": FIRST, "total_channels": CHANNELS,
                          "channels_per_heap": HELD, "spectra_per_heap": SPECTRA, "batches": 1,
                          "stops": 2, "chunks_in_flight": 4, "buffers": 8, "idle_timeout": 30}},
                      "corr": {"plugin": "correlator", "params": {"heap_accumulation_threshold": DUMP}},
                      "reduce": {"plugin": "reducer"},
                      "sink": {"plugin": "filesink", "params": {"path": path,
                                                                "input_labels": ",".join(LABELS)}}},
            "edges": ["recv.batches -> corr.in", "corr.out -> reduce.in", "reduce.out -> sink.in"]}


def write(path, doc):
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def check_file(path):
    with h5py.File(path) as f:
        g = f["reduce"]
        at = {k: (v.decode() if isinstance(v, bytes) else v) for k, v in g.attrs.items()}
        want = {"channels": CHANNELS, "first_channel": FIRST, "channel_count": HELD, "bits": 32,
                "bandwidth": FS / 2, "centre_frequency": FS / 4, "sync_time": 0.0}
        for name, value in want.items():
            if at.get(name) != value:
                fail(f"attribute {name} = {at.get(name)}, want {value}")
        if g["data"].shape[1] != HELD:
            fail(f"data holds {g['data'].shape[1]} channels")
        # Channel c of the band at c fs / (2 N): the wideband plan, in float64 here.
        freq = g["channel_frequency"][()]
        if not np.allclose(freq, np.arange(FIRST, FIRST + HELD) * FS / (2 * CHANNELS), rtol=0, atol=1e-6):
            fail(f"channel_frequency {freq[:3]} ..")
        if abs(freq[K - FIRST] - TONE) > 1e-6:
            fail(f"index {K - FIRST} is at {freq[K - FIRST]} Hz, not the tone's {TONE}")
        labels = np.char.decode(g["input_labels"][()]).tolist()
        bls = np.char.decode(g["bls_ordering"][()]).tolist()
        if labels != LABELS or len(bls) != 12 or bls[4:8] != [[LABELS[0], LABELS[2]], [LABELS[1], LABELS[2]],
                                                                [LABELS[0], LABELS[3]], [LABELS[1], LABELS[3]]]:
            fail(f"labels {labels}, bls_ordering {bls}")
        v = g["data"][()]
        ok = g["present"][()].all(axis=1)
        if ok.sum() < 3:
            fail(f"only {ok.sum()} whole dumps")
        # The tone's power must sit at its channel's index in the file.
        auto = v[ok][:, :, 0, 0].astype(np.float64).sum(axis=0)
        if int(np.argmax(auto)) != K - FIRST:
            fail(f"autocorrelation peaks at index {int(np.argmax(auto))}, not {K - FIRST}")


def check_scripts(path, fpath):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "xeng-phases.py"), path,
                        "--pipeline", fpath], capture_output=True, text=True)
    if r.returncode:
        fail(f"xeng-phases.py: {r.stdout}{r.stderr}")
    if f"channels {FIRST} .. {FIRST + HELD - 1} of {CHANNELS}" not in r.stdout or \
            f"in channel {K}" not in r.stdout:
        fail(f"xeng-phases.py does not name the range and the tone's channel:\n{r.stdout}")
    row = re.search(r"^\| 0 \| 1 \| \S+ \| (\S+) \| (\S+) \| (\S+) \| m000v x m001v \|$", r.stdout, re.M)
    if not row:
        fail(f"xeng-phases.py has no row for baseline (0, 1):\n{r.stdout}")
    coherence, phase, expect = (float(x) for x in row.groups())
    # 360 (d2 - d1) k / (2 N) degrees; the tone is ~70x the noise per
    # channel, so the measured phase is good to a small fraction of a degree:
    # 1 degree catches any wrong channel (neighbours differ by 0.9 degrees
    # of expected phase but by far more in coherence) or a wrong sign.
    want = 360 * (DELAYS[1] - DELAYS[0]) * K / (2 * CHANNELS)
    if abs(expect - want) > 0.05 or abs(phase - want) > 1.0 or coherence < 0.99:
        fail(f"baseline (0, 1): phase {phase}, expected column {expect}, want {want:.2f}; "
             f"coherence {coherence}\n{r.stdout}")
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cbf-describe"), path],
                       capture_output=True, text=True)
    for w in [f"channels: {HELD} of the band's {CHANNELS}, channels {FIRST} .. {FIRST + HELD - 1}",
              "(m000h, m000v)", "received from the network", "sync_time 0"]:
        if r.returncode or w not in r.stdout:
            fail(f"cbf-describe does not say {w!r}:\n{r.stdout}{r.stderr}")
    print(f"ok: xeng-phases found channel {K} at index {K - FIRST}, phase {phase} deg (want {want:.2f})")


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory(prefix="cbf-xrange-") as tmp, \
            socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as unread:
        unread.bind(("127.0.0.1", 0))              # the first X-engine's range lands here
        port = free_port()
        path = os.path.join(tmp, "xeng1.h5")
        fpath = write(os.path.join(tmp, "feng.yaml"),
                      fengines(f"127.0.0.1:{unread.getsockname()[1]},127.0.0.1:{port}"))
        rx = subprocess.Popen([cbf_run, write(os.path.join(tmp, "xeng.yaml"), xengine(port, path))],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        deadline = time.monotonic() + 30
        while not bound(port) and rx.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        if not bound(port):
            fail(f"X-engine did not start: {rx.communicate()[0]}")
        tx = subprocess.run([cbf_run, fpath, "--quiet"], capture_output=True, text=True, timeout=180)
        if tx.returncode:
            rx.kill()
            fail(f"F-engines exited {tx.returncode}: {tx.stdout}{tx.stderr}")
        log = rx.communicate(timeout=120)[0]
        if rx.returncode:
            fail(f"X-engine exited {rx.returncode}: {log}")
        check_file(path)
        check_scripts(path, fpath)
    return 0


if __name__ == "__main__":
    sys.exit(main())
