#!/usr/bin/env python3
"""X-engine stream: pipelines/demo.yaml (the array in one process) with its
HDF5 sink swapped for the sender; spead2 receives the heaps and decodes every
item (descriptors, timestamp, frequency, xeng_raw) and each value must equal
the HDF5 output of the unchanged pipeline, including any flagged value.

usage: xeng_stream.py CBF_RUN
"""
import os
import socket
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

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
LENGTH, DUMP, CPH = 8388608, 4, 256


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def main():
    cbf_run = sys.argv[1]
    with open(os.path.join(ROOT, "pipelines", "demo.yaml")) as f:
        demo = yaml.safe_load(f)
    demo["engine"]["gpu"] = "none"
    demo["nodes"]["dsim"]["params"]["length"] = LENGTH
    demo["nodes"]["corr"]["params"]["heap_accumulation_threshold"] = DUMP
    # One digitiser heap of antenna 1 missing: its baselines carry the
    # missing-data value (-2^31, 1) in one dump, which must travel as is.
    demo["nodes"]["dsim"]["params"].update(missing=[300], missing_inputs=[2])
    with tempfile.TemporaryDirectory() as tmp:
        demo["nodes"]["sink"]["params"]["path"] = os.path.join(tmp, "ref.h5")
        with open(os.path.join(tmp, "ref.yaml"), "w") as f:
            yaml.safe_dump(demo, f)
        subprocess.run([cbf_run, os.path.join(tmp, "ref.yaml"), "--quiet"], check=True, timeout=240)
        ref = h5py.File(os.path.join(tmp, "ref.h5"))["reduce"]
        ref_vis, ref_ts = ref["data"][()], ref["timestamp"][()]      # [dump][channel][bp][2]
        if not (ref_vis[..., 0] == -2**31).any():
            fail("the reference has no flagged visibility: the test would not cover it")

        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        stream = spead2.recv.Stream(spead2.ThreadPool(), spead2.recv.StreamConfig(max_heaps=8))
        stream.add_udp_reader(port, bind_hostname="127.0.0.1", buffer_size=16 << 20)
        demo["nodes"]["sink"] = {"plugin": "sender", "params": {
            "destinations": f"127.0.0.1:{port}", "channels_per_heap": CPH}}
        with open(os.path.join(tmp, "tx.yaml"), "w") as f:
            yaml.safe_dump(demo, f)
        subprocess.run([cbf_run, os.path.join(tmp, "tx.yaml"), "--quiet"], check=True, timeout=240)
        ig = spead2.ItemGroup()
        got = {}
        for heap in stream:
            if "xeng_raw" in ig.update(heap):
                got[(ig["timestamp"].value, ig["frequency"].value)] = ig["xeng_raw"].value.copy()
        item = ig["xeng_raw"]
        shape = (CPH, ref_vis.shape[2], 2)
        if item.id != 0x1800 or tuple(item.shape) != shape or item.dtype != np.dtype("<i4"):
            fail(f"xeng_raw descriptor: id {item.id:#x} shape {item.shape} dtype {item.dtype}")
        channels = ref_vis.shape[1]
        if len(got) != len(ref_ts) * channels // CPH:
            fail(f"spead2 decoded {len(got)} heaps, expected {len(ref_ts) * channels // CPH}")
        for d, ts in enumerate(ref_ts):
            for f0 in range(0, channels, CPH):
                if not np.array_equal(got[(int(ts), f0)], ref_vis[d, f0:f0 + CPH]):
                    fail(f"xeng_raw at timestamp {ts}, channel {f0} differs")
        print(f"ok: spead2 decoded {len(got)} X-engine heaps ({len(ref_ts)} dumps), values as written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
