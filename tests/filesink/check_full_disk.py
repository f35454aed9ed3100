#!/usr/bin/env python3
"""The filesink when the disk fills, and when the engine never starts:
  1. cbf-run with a file size limit (ulimit -f, 8 MiB: how a full disk
     looks to one process, without needing a small file system) on an
     endless dsim -> filesink: the node fails at the buffer that does not
     fit, naming the file; cbf-run exits 1 at once (not when the source
     ends, which is never); the file opens and holds every buffer before;
  2. two filesinks, the second unable to create its file: cbf-run exits
     non-zero and the first leaves no empty file behind;
  3. `overwrite: true` replacing an earlier file says so (a warning naming
     it), and is silent when there was none.

usage: check_full_disk.py CBF_RUN
"""
import os
import resource
import signal
import subprocess
import sys
import tempfile

try:
    import h5py
    import yaml
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/yaml not importable ({e})")
    sys.exit(77)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def limit_file_size():
    resource.setrlimit(resource.RLIMIT_FSIZE, (8 << 20, 8 << 20))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)   # the write fails with EFBIG instead


def write(tmp, name, doc):
    path = os.path.join(tmp, name + ".yaml")
    with open(path, "w") as f:
        yaml.safe_dump(doc, f)
    return path


def main():
    cbf_run = sys.argv[1]
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "full.h5")
        doc = {"engine": {"gpu": "none"},
               "nodes": {"dsim": {"plugin": "dsim", "params": {"antennas": 1, "length": 0,
                                                                "samples_per_chunk": 262144}},
                         "sink": {"plugin": "filesink", "params": {"path": out}}},
               "edges": ["dsim.out -> sink.in"]}
        r = subprocess.run([cbf_run, write(tmp, "full", doc), "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=120, preexec_fn=limit_file_size)
        if r.returncode != 1 or out not in r.stdout or "no room for buffer" not in r.stdout:
            fail(f"a full disk: expected exit 1 naming {out}, got {r.returncode}: {r.stdout}")
        n = int(r.stdout.split("no room for buffer ")[1].split()[0])
        with h5py.File(out) as f:
            got = f["dsim"]["data"].shape[0]
        if n < 1 or got != n:
            fail(f"a full disk: the file holds {got} buffers, the error says {n} came before")
        print(f"ok: the disk filled at buffer {n}: exit 1 at once, the file readable with its {got} buffers")

        first = os.path.join(tmp, "first.h5")
        doc = {"engine": {"gpu": "none"},
               "nodes": {"dsim": {"plugin": "dsim", "params": {"length": 65536, "samples_per_chunk": 65536}},
                         "a": {"plugin": "filesink", "params": {"path": first}},
                         "b": {"plugin": "filesink", "params": {"path": "/proc/no-such-dir/b.h5"}}},
               "edges": ["dsim.out -> a.in", "dsim.out -> b.in"]}
        r = subprocess.run([cbf_run, write(tmp, "two", doc), "--quiet"], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, text=True, timeout=60)
        if r.returncode == 0 or "b.h5" not in r.stdout:
            fail(f"an engine that cannot start: expected an error naming b.h5: {r.stdout}")
        if os.path.exists(first):
            fail("an engine that did not start left an empty file behind")
        print("ok: an engine that failed to start left no empty file")

        # overwrite: true replaces an earlier capture, and says so.
        again = os.path.join(tmp, "again.h5")
        doc = {"engine": {"gpu": "none"},
               "nodes": {"dsim": {"plugin": "dsim", "params": {"length": 65536, "samples_per_chunk": 65536}},
                         "sink": {"plugin": "filesink", "params": {"path": again, "overwrite": True}}},
               "edges": ["dsim.out -> sink.in"]}
        logs = [subprocess.run([cbf_run, write(tmp, "again", doc)], stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True, timeout=60).stdout for _ in range(2)]
        if "is replaced" in logs[0] or f"{again} exists and is replaced (overwrite: true)" not in logs[1]:
            fail(f"overwrite: true should warn only when it replaces a file: {logs}")
        print("ok: overwrite: true says when it replaces an earlier capture")
    return 0


if __name__ == "__main__":
    sys.exit(main())
