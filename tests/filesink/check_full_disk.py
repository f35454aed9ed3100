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
     it), and is silent when there was none;
  4. a path that is not a regular file (/dev/full), overwrite or not, is
     refused naming `path`'s YAML place, and never said to be replaced.
With --other-writer instead: another process fills a small tmpfs (mounted
here; root only, else skipped) while cbf-run writes an endless dsim into
it: cbf-run exits 1 (not by a signal) naming the file, and the file opens
and holds every buffer before the one that did not fit, equal to an
uninterrupted run's.

usage: check_full_disk.py CBF_RUN [--other-writer]
"""
import errno
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


def sink_doc(out, length):
    return {"engine": {"gpu": "none"},
            "nodes": {"dsim": {"plugin": "dsim", "params": {"antennas": 1, "length": length,
                                                             "samples_per_chunk": 262144}},
                      "sink": {"plugin": "filesink", "params": {"path": out}}},
            "edges": ["dsim.out -> sink.in"]}


def other_writer(cbf_run):
    """A second writer takes the disk's last space mid-capture."""
    if os.geteuid() != 0:
        print("skipped: mounting a tmpfs needs root")
        return 77
    with tempfile.TemporaryDirectory() as tmp:
        mnt = os.path.join(tmp, "mnt")
        os.mkdir(mnt)
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", mnt]).returncode != 0:
            print("skipped: cannot mount a tmpfs")
            return 77
        try:
            out = os.path.join(mnt, "x.h5")
            p = subprocess.Popen([cbf_run, write(tmp, "fill", sink_doc(out, 0)), "--quiet"],
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            # Once the capture is under way (its file past 2 MB: the engine's
            # progress), the other writer takes every free byte, 64 KiB at a
            # time, while the sink goes on writing.
            while p.poll() is None and not (os.path.exists(out) and os.path.getsize(out) > 2 << 20):
                pass
            filled = 0
            with open(os.path.join(mnt, "other"), "wb") as f:
                try:
                    for _ in range(1 << 12):   # 256 MiB at most: more than the file system
                        f.write(b"\1" * 65536)
                        f.flush()
                        filled += 65536
                except OSError as e:
                    if e.errno != errno.ENOSPC:
                        raise
            log, _ = p.communicate(timeout=120)
            if p.returncode != 1 or out not in log or "no room for buffer" not in log:
                fail(f"another writer filled the disk: expected exit 1 naming {out}, got "
                     f"{p.returncode}: {log}")
            n = int(log.split("no room for buffer ")[1].split()[0])
            with h5py.File(out) as f:
                got = {k: f["dsim"][k][:] for k in ("data", "timestamp", "seq")}
            ref_path = os.path.join(tmp, "ref.h5")
            r = subprocess.run([cbf_run, write(tmp, "ref", sink_doc(ref_path, 262144 * n)), "--quiet"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=120)
            if r.returncode != 0:
                fail(f"the reference run: exit {r.returncode}: {r.stdout}")
            with h5py.File(ref_path) as f:
                ref = {k: f["dsim"][k][:] for k in got}
            for k in got:
                if got[k].shape != ref[k].shape or not (got[k] == ref[k]).all():
                    fail(f"another writer filled the disk: /dsim/{k} {got[k].shape} differs from "
                         f"the uninterrupted run's first {n} buffers {ref[k].shape}")
            print(f"ok: another writer took {filled / 1e6:.1f} MB; cbf-run exit 1 at buffer {n}, "
                  f"the file opens with its {n} buffers, equal to an uninterrupted run's")
        finally:
            subprocess.run(["umount", mnt])
    return 0


def main():
    cbf_run = sys.argv[1]
    if sys.argv[2:] == ["--other-writer"]:
        return other_writer(cbf_run)
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

        # Not a regular file: refused, never "replaced".
        for overwrite in (False, True):
            doc = {"engine": {"gpu": "none"},
                   "nodes": {"dsim": {"plugin": "dsim", "params": {"length": 65536, "samples_per_chunk": 65536}},
                             "sink": {"plugin": "filesink", "params": {"path": "/dev/full", "overwrite": overwrite}}},
                   "edges": ["dsim.out -> sink.in"]}
            y = write(tmp, "devfull", doc)
            r = subprocess.run([cbf_run, y], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True, timeout=60)
            if (r.returncode == 0 or "is replaced" in r.stdout or f"{y}:" not in r.stdout
                    or "path: /dev/full exists and is not a regular file" not in r.stdout):
                fail(f"/dev/full (overwrite: {overwrite}): expected a refusal naming path: "
                     f"exit {r.returncode}: {r.stdout}")
            if not os.path.exists("/dev/full") or not os.stat("/dev/full").st_rdev:
                fail("/dev/full is no longer the device")
        print("ok: /dev/full as path is refused naming path, and not said to be replaced")
    return 0


if __name__ == "__main__":
    sys.exit(main())
