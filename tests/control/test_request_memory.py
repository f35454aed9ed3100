#!/usr/bin/env python3
"""A ZeroMQ request's memory is bounded by its size and given back (issue
31 item 4: an 8.3 MB request of keys peaked at 2.1 GB and kept 1.3 GB
resident; an 8.1 MB list of `{}` took 1.2 GB).

An engine with one node of tests/control/ctl_hold.c (request `hold`, args
`ms` and `values`) gets, one at a time through `cbf-ctl raw -`, requests
of nearly 8 MiB (the cap) shaped to cost the most per byte:

- a million short keys no request declares;
- a few thousand long keys (each parsed cheaply, so the keys are refused
  by name before any value is read);
- `values` as a list of empty objects;
- and the honest long request: 131072 numbers (a 65536-channel complex
  gain table), which is answered ok.

Before each, the engine's peak resident size is reset (/proc/PID/clear_refs
5) and its resident size read; after the reply, the peak (VmHWM) may be at
most PEAK_FACTOR times the request's size above that, and the resident size
(VmRSS) back within KEPT of it; after two rounds of all four the engine is
within KEPT of its size before the first (glibc may keep a message-sized
block per thread that held one; nothing grows per request). RSS is a measurement of the engine, not a
timing: the bounds have a wide margin and the unfixed engine is far
outside them (GB, not MB). The engine answers every request (an error
naming the reason for the three hostile ones) and is still running."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import CBF_CTL, CBF_RUN, check, hold_engine  # noqa: E402

if not (os.access(CBF_RUN, os.X_OK) and os.access(CBF_CTL, os.X_OK)):
    print("skipped: cbf-run / cbf-ctl are not built yet")
    sys.exit(77)

MAX_REQUEST = 8 << 20             # CBF_CONTROL_MAX_REQUEST
PEAK_FACTOR = 16                  # the bound: peak at most 16 times the request
# Resident afterwards: back within 24 MiB of before. glibc may keep a
# message-sized block (up to the 8 MiB cap) in the arena of each thread that
# held one: ZeroMQ's I/O thread and the thread that parsed it, so two caps,
# plus room for the rest; 16 MiB was exceeded by 1 MiB now and then on a
# loaded machine (17.0 MiB, here and on the GPU machine). The unfixed
# engine kept 1.3 GB: this bound still tells the two apart by 50 times.
KEPT = 24 << 20
ROUNDS = 2                        # the second round may not grow the engine further

HEAD = '{"request": "hold", "node": "hold"'


def fill(item_of, size):
    """HEAD, then items item_of(0), item_of(1), ... joined by ", " until the
    text would pass size, then "}"."""
    parts, n, i = [HEAD], len(HEAD) + 1, 0
    while True:
        item = ", " + item_of(i)
        if n + len(item) > size:
            break
        parts.append(item)
        n += len(item)
        i += 1
    return "".join(parts) + "}"


def cases():
    size = MAX_REQUEST - 64
    short_keys = fill(lambda i: '"k%07d": 0' % i, size)
    long_keys = fill(lambda i: '"%s%06d": 0' % ("k" * 2000, i), size)
    head = HEAD + ', "values": ['
    objects = head + ", ".join(["{}"] * ((size - len(head)) // 4)) + "]}"
    n = 2 * 65536
    honest = head + ", ".join("%.17e" % ((i % 977) / 977.0 - 0.5) for i in range(n)) + "]}"
    return [("a million unknown short keys", short_keys, "refused"),
            ("thousands of unknown 2 kB keys", long_keys, "has no argument"),
            ("a list of empty objects", objects, "refused"),
            ("131072 numbers", honest, None)]


def status(pid):
    """VmHWM and VmRSS of pid, in bytes."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            if k in ("VmHWM", "VmRSS"):
                out[k] = int(v.split()[0]) * 1024
    return out["VmHWM"], out["VmRSS"]


def reset_peak(pid):
    with open("/proc/%d/clear_refs" % pid, "w") as f:
        f.write("5")


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-reqmem-") as tmp:
        with hold_engine(tmp) as e:
            pid = e.proc.pid
            try:
                reset_peak(pid)
            except OSError as x:
                print("SKIP: cannot reset the engine's peak RSS (%s)" % x)
                return 77
            _, start = status(pid)
            for what, text, want in cases() * ROUNDS:
                check(len(text) <= MAX_REQUEST, "%s: a request of %d bytes" % (what, len(text)))
                path = os.path.join(tmp, "req.json")
                with open(path, "w") as f:
                    f.write(text)
                reset_peak(pid)
                _, before = status(pid)
                with open(path) as f:
                    r = subprocess.run([CBF_CTL, "-e", e.control, "-t", "120", "--json", "raw", "-"], stdin=f,
                                       capture_output=True, text=True, timeout=180)
                peak, after = status(pid)
                print("%s: %d bytes; resident %.1f MiB before, peak %.1f MiB (+%.1f, %.1fx), "
                      "%.1f MiB after" % (what, len(text), before / 2**20, peak / 2**20,
                                          (peak - before) / 2**20, (peak - before) / len(text), after / 2**20))
                if want is None:
                    check(r.returncode == 0 and json.loads(r.stdout)["values"] == 2 * 65536,
                          "%s: answered ok, every value read" % what)
                else:
                    check(r.returncode == 1 and want in r.stderr,
                          "%s: refused (%s)" % (what, r.stderr.strip()[:200]))
                check(peak - before <= PEAK_FACTOR * len(text),
                      "%s: peak %.1f MiB above before, at most %d times the request (%.1f MiB)"
                      % (what, (peak - before) / 2**20, PEAK_FACTOR, PEAK_FACTOR * len(text) / 2**20))
                check(after - before <= KEPT,
                      "%s: resident afterwards %.1f MiB above before, at most %d MiB"
                      % (what, (after - before) / 2**20, KEPT >> 20))
                check(e.running(), "%s: the engine is still running" % what)
            _, end = status(pid)
            check(end - start <= KEPT, "after %d rounds: resident %.1f MiB above the start, at most %d MiB"
                  % (ROUNDS, (end - start) / 2**20, KEPT >> 20))
            check(e.shutdown() == 0, "the engine drains and exits 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
