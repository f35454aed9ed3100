#!/usr/bin/env python3
"""katcp clients that try to hold the server (issue 31, items 1 and 2).

Long and deeply nested requests (an engine with ctl_hold's node):

- `?hold node=hold values=` followed by 100,000 '[' (100 KB): a second
  client's ?watchdog is answered meanwhile, and the hostile request is
  refused naming the nesting (libyaml took 35-68 s over it, and every
  other client waited); the same nested text under 64 KiB, answered on
  the server's own thread, is refused as quickly; the ZeroMQ plane gives
  the same refusal for JSON nested 2000 deep (one parsing place);
- a long `?hold` (over 64 KiB, ms=4000) from one client: another client's
  ?sensor-value hold.holding reads 1 meanwhile (answered while it was held:
  the order is read from the engine, not timed), a third client's long
  request meanwhile is refused "busy", and the first client's next line,
  sent right behind its long one, is answered after that one's reply.

Idle clients (an engine with katcp_idle_timeout: 1):

- 200 connections that send nothing, one after another: each is greeted
  with #version-connect (64 are served at once; a newcomer takes the
  place of the client idle longest, which is told why); then a newcomer's
  ?watchdog is answered (before: the 17th got "#disconnect too many
  clients" and the rest nothing);
- every idle connection ends with a #disconnect inform and EOF;
- a client sampling a sensor is kept past the timeout (its informs are
  what it connected for).

The latencies are printed, not held to a bound: the timeouts here (20 s)
only detect a server that does not answer at all."""
import asyncio
import os
import socket
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import CBF_CTL, CBF_RUN, check, fail, hold_engine  # noqa: E402

try:
    import aiokatcp
except ImportError:
    print("SKIP: aiokatcp is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

if not (os.access(CBF_RUN, os.X_OK) and os.access(CBF_CTL, os.X_OK)):
    print("skipped: cbf-run / cbf-ctl are not built yet")
    sys.exit(77)

WAIT = 20          # seconds: only a server that does not answer at all fails on it
DEEP = 100000
HOLD_MS = 4000
KATCP = ["katcp: 127.0.0.1:0"]    # the engine's keys beside its node `hold` (ctl_util.hold_engine)



class Line:
    """A raw katcp connection, read line by line."""

    def __init__(self, addr):
        self.s = socket.create_connection(addr, timeout=WAIT)
        self.buf = b""

    def send(self, data):
        self.s.sendall(data)

    def line(self):
        """The next line, or None at EOF."""
        while b"\n" not in self.buf:
            d = self.s.recv(65536)
            if not d:
                return None
            self.buf += d
        line, self.buf = self.buf.split(b"\n", 1)
        return line.decode(errors="replace")

    def until(self, prefix):
        """Lines up to the first starting with prefix (None at EOF)."""
        got = []
        while True:
            line = self.line()
            if line is None:
                return got, None
            got.append(line)
            if line.startswith(prefix):
                return got, line

    def close(self):
        self.s.close()


async def timed_watchdog(addr):
    t0 = time.monotonic()
    client = await asyncio.wait_for(aiokatcp.Client.connect(*addr), WAIT)
    try:
        reply, _ = await asyncio.wait_for(client.request("watchdog"), WAIT)
    finally:
        client.close()
        await client.wait_closed()
    return time.monotonic() - t0


def watchdog_meanwhile(addr):
    try:
        return asyncio.run(timed_watchdog(addr))
    except asyncio.TimeoutError:
        fail("?watchdog from another client got no answer within %d s" % WAIT)


def nested(e):
    addr = e.katcp
    a = Line(addr)
    a.until("#version-connect katcp-device")
    t0 = time.monotonic()
    a.send(b"?hold[1] node=hold values=" + b"[" * DEEP + b"\n")
    dt = watchdog_meanwhile(addr)
    check(True, "another client's ?watchdog answered %.3f s after %d '[' were sent" % (dt, DEEP))
    _, reply = a.until("!hold[1]")
    dt = time.monotonic() - t0
    check(reply is not None and reply.startswith("!hold[1] fail") and "nested\\_deeper\\_than\\_64" in reply,
          "the nested request is refused in %.3f s, naming the nesting (%s)" % (dt, (reply or "")[:160]))
    # Under KC_INLINE_MAX: answered on the server's thread, as quickly.
    t0 = time.monotonic()
    a.send(b"?hold[2] node=hold values=" + b"[" * 60000 + b"\n")
    _, reply = a.until("!hold[2]")
    check(reply is not None and "nested\\_deeper\\_than\\_64" in reply,
          "60,000 '[' (answered inline) refused in %.3f s" % (time.monotonic() - t0))
    # Quoted, the brackets are text: no nesting, the usual type error.
    a.send(b"?hold[3] node=hold values='" + b"[" * DEEP + b"'\n")
    _, reply = a.until("!hold[3]")
    check(reply is not None and "expected" in reply and "nested" not in reply,
          "quoted '[' are a scalar, not nesting (%s)" % (reply or "")[:120])
    a.close()
    # The ZeroMQ plane parses through the same place (JSON nested 2000 deep:
    # jansson takes up to 2048 levels, the YAML reading that follows 64).
    t0 = time.monotonic()
    r = subprocess.run([CBF_CTL, "-e", e.control, "-t", str(WAIT), "raw",
                        '{"request": "hold", "values": %s}' % ("[" * 2000 + "]" * 2000)],
                       capture_output=True, text=True, timeout=2 * WAIT)
    check(r.returncode == 1 and "nested deeper than 64" in r.stderr,
          "ZeroMQ: the same text refused in %.3f s (%s)" % (time.monotonic() - t0, r.stderr.strip()[:160]))


def holding(addr):
    c = Line(addr)
    c.send(b"?sensor-value hold.holding\n")
    got, _ = c.until("!sensor-value")
    c.close()
    v = [line.split(" ") for line in got if line.startswith("#sensor-value")]
    return v[0][5] if v else None


def long_requests(e):
    addr = e.katcp
    values = ",".join("%.17e" % (i / 7.0) for i in range(8000))   # about 190 KB
    line = ("?hold node=hold ms=%d values=[%s]" % (HOLD_MS, values)).encode()
    check(len(line) > 64 << 10, "a long request of %d bytes" % len(line))
    a = Line(addr)
    a.until("#version-connect katcp-device")
    a.send(line + b"\n?watchdog\n")   # its next line, right behind it
    deadline = time.monotonic() + WAIT
    seen = None
    while seen != "1" and time.monotonic() < deadline:
        seen = holding(addr)
    check(seen == "1", "another client's ?sensor-value hold.holding reads 1 while the long request is held")
    b = Line(addr)
    b.send(line + b"\n")
    _, reply = b.until("!hold")
    check(reply is not None and reply.startswith("!hold fail busy"),
          "a third client's long request meanwhile is refused as busy (%s)" % (reply or "")[:120])
    check(holding(addr) == "1", "and the first is still held")
    b.close()
    got, reply = a.until("!watchdog")
    replies = [g for g in got if g.startswith("!")]
    check(len(replies) == 2 and replies[0].startswith("!hold ok") and "values=8000" in replies[0] and
          replies[1] == "!watchdog ok",
          "the long request is answered (all 8000 values), then the line behind it (%s)"
          % [r[:60] for r in replies])
    a.close()


def idle(tmp):
    e = hold_engine(tmp, KATCP + ["katcp_idle_timeout: 1"], "idle")
    try:
        addr = e.katcp
        # A subscriber: kept, though it sends nothing more.
        sub = Line(addr)
        sub.send(b"?sensor-sampling hold.holding period 0.5\n")
        sub.until("!sensor-sampling ok")
        conns = []
        t0 = time.monotonic()
        for i in range(200):
            c = Line(addr)
            got, last = c.until("#version-connect katcp-device")
            if last is None:
                fail("idle connection %d got no #version-connect (%s)" % (i + 1, got))
            conns.append(c)
        check(True, "200 connections that send nothing are each greeted (%.2f s)" % (time.monotonic() - t0))
        dt = watchdog_meanwhile(addr)
        check(True, "a newcomer's ?watchdog is answered in %.3f s with 200 idle connections made" % dt)
        evicted = timed_out = 0
        for i, c in enumerate(conns):
            got, last = c.until("#disconnect")
            if last is None:
                fail("idle connection %d ended without a #disconnect (%s)" % (i + 1, got[-3:]))
            evicted += "idle\\_longest" in last
            timed_out += "katcp_idle_timeout" in last
            if c.line() is not None:
                fail("idle connection %d: more after its #disconnect" % (i + 1))
            c.close()
        check(evicted + timed_out == 200 and evicted > 0,
              "every idle connection is told why and closed: %d made room for newcomers, %d timed out"
              % (evicted, timed_out))
        # The subscriber is still served, well past the timeout.
        sub.send(b"?watchdog\n")
        got, last = sub.until("!watchdog")
        check(last == "!watchdog ok" and any(g.startswith("#sensor-status") for g in got)
              and not any(g.startswith("#disconnect") for g in got),
              "the sampling client is kept (%d informs meanwhile)" % sum(g.startswith("#sensor-status") for g in got))
        sub.close()
    finally:
        e.kill()


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-katcp-hostile-") as tmp:
        e = hold_engine(tmp, KATCP)
        try:
            nested(e)
            long_requests(e)
            check(e.running(), "the engine is still running")
        finally:
            e.kill()
        idle(tmp)
    return 0


if __name__ == "__main__":
    sys.exit(main())
