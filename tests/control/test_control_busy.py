#!/usr/bin/env python3
"""Other clients are answered while a long request is in flight (issue 16:
a 60 MB gain request held the control thread, and a `sensors` request
waited as long).

An engine whose node `hold` (tests/control/ctl_hold.c) keeps a `hold`
request for a few seconds, its gauge `holding` 1 meanwhile. cbf-ctl sends
one of nearly 8 MiB (a list of 131072 numbers written with 60 digits, the
longest message the engine reads); while it is in flight:

- a ZeroMQ `sensors` request from another client is answered, and its
  reply reads holding = 1: it was answered while the long request was
  held, not after (the order is read from the engine, not timed);
- a katcp ?watchdog and ?sensor-value hold.holding from a katcp client
  are answered likewise;
- a second long request is refused at once as busy (one long request at a
  time: at most two such messages are held);
- the long request's own reply then arrives, ok, with every value read.

Before the long requests went to a thread of their own, the first check
failed: the `sensors` reply came after the long one's, reading holding 0."""
import json
import os
import random
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import CBF_CTL, CBF_RUN, check, fail, hold_engine  # noqa: E402

if not (os.access(CBF_RUN, os.X_OK) and os.access(CBF_CTL, os.X_OK)):
    print("skipped: cbf-run / cbf-ctl are not built yet")
    sys.exit(77)

HOLD_MS = 4000
N = 2 * 65536                     # a 65536-channel complex gain table's values
MAX_REQUEST = 8 << 20             # CBF_CONTROL_MAX_REQUEST

KATCP = ["katcp: 127.0.0.1:0"]    # the engine's keys beside its node `hold`


def long_request(path):
    """The hold request with N values padded to just under the cap; returns the last value."""
    head = '{"request": "hold", "node": "hold", "ms": %d, "values": [' % HOLD_MS
    digits = (MAX_REQUEST - len(head) - 8) // N - 6   # each value: digits, e-XX, ", "
    vals = []
    for _ in range(N):
        m = "%.17e" % random.uniform(-1, 1)
        mant, exp = m.split("e")
        vals.append(mant + "0" * (digits - len(mant)) + "e" + exp)
    text = head + ", ".join(vals) + "]}"
    check(MAX_REQUEST - 2 * N < len(text) <= MAX_REQUEST, "a long request of %d bytes" % len(text))
    with open(path, "w") as f:
        f.write(text)
    return float(vals[-1])


def holding(e):
    rc, reply, err = e.request({"request": "sensors"})
    if rc:
        fail("sensors: %s" % err.strip())
    return reply["sensors"]["nodes"]["hold"]["gauges"]["holding"]


def katcp_lines(addr, text, want_last):
    """Sends text on a fresh katcp connection; the lines up to one starting with want_last."""
    with socket.create_connection(addr, timeout=30) as s:
        s.sendall(text.encode())
        buf = b""
        while not any(line.startswith(want_last.encode()) for line in buf.split(b"\n")):
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    return buf.decode().split("\n")


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-busy-") as tmp:
        with hold_engine(tmp, KATCP) as e:
            path = os.path.join(tmp, "long.json")
            last = long_request(path)
            check(holding(e) == 0, "nothing held before the long request")
            with open(path) as f:
                big = subprocess.Popen([CBF_CTL, "-e", e.control, "-t", "60", "--json", "raw", "-"], stdin=f,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            # Until a sensors reply reads holding = 1, or the long reply comes first.
            deadline = time.monotonic() + 60
            seen = False
            while not seen and time.monotonic() < deadline:
                seen = holding(e) == 1
                if not seen and big.poll() is not None:
                    fail("the long request was answered before any sensors reply came while it was held")
            check(seen and big.poll() is None,
                  "a sensors request is answered while the long request is held (holding = 1)")
            lines = katcp_lines(e.katcp, "?watchdog\n?sensor-value hold.holding\n", "!sensor-value")
            check("!watchdog ok" in lines, "katcp ?watchdog answered meanwhile (%s)" % lines[:1])
            value = [line.split(" ") for line in lines if line.startswith("#sensor-value")]
            check(value and value[0][3] == "hold.holding" and value[0][5] == "1",
                  "katcp ?sensor-value hold.holding reads 1 meanwhile (%s)" % value)
            with open(path) as f:
                r = subprocess.run([CBF_CTL, "-e", e.control, "-t", "20", "raw", "-"], stdin=f,
                                   capture_output=True, text=True, timeout=30)
            check(r.returncode == 1 and "busy" in r.stderr and big.poll() is None,
                  "a second long request meanwhile is refused as busy (%s)" % r.stderr.strip())
            check(holding(e) == 1, "and the first is still held")
            out, err = big.communicate(timeout=60)
            check(big.returncode == 0, "the long request is answered (%s)" % err.strip())
            reply = json.loads(out)
            check(reply["ok"] and reply["values"] == N and reply["last"] == last,
                  "ok, with all %d values read (the last %.17g)" % (N, reply["last"]))
            check(holding(e) == 0, "nothing held after it")
            check(e.shutdown() == 0, "the engine drains and exits 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
