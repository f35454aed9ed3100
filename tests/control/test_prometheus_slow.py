"""Prometheus /metrics answers a scrape while slow clients hold connections
(issue 31 item 3: 16 to 40 slowloris connections stopped /metrics from
answering; with 40, no scrape succeeded in 35 s).

A slowloris client sends a request head a few bytes at a time, each well
inside the server's per-connection timeout, so it is never idle and never
done. Two shapes, each with SLOW such clients open while a normal scrape
comes from 127.0.0.1 (all of 127.0.0.0/8 is loopback; the slow clients are
bound to other addresses of it, as they would come from other hosts):

- SLOW clients from SLOW different addresses (127.0.0.2, .3, ...): the
  engine holds them all (they are not idle) and still answers the scrape;
- SLOW clients from one address (127.0.0.2): the per-source limit closes
  those beyond it, and the scrape is answered.

The scrape's timeout (SCRAPE_TIMEOUT_S, generous) is the failure detector;
the time it took is printed, not asserted. The scrape connects after the
slow clients, and a listening socket's queue is first in, first out: the
server has taken (held or closed) every slow connection before it can
take the scrape's, so no wait is needed. The slow clients trickle from a
thread that stops by itself (when told, or after TRICKLE_MAX_S)."""
import os
import select
import socket
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import Engine, check, fail, free_port  # noqa: E402

SLOW = 40
SCRAPE_TIMEOUT_S = 20
TRICKLE_S = 1.0          # a byte per client this often: inside any idle timeout
TRICKLE_MAX_S = 120
CONNECT_S = 5            # for all the slow clients' connections together

YAML = """
engine:
  name: slow
  gpu: none
  control: tcp://127.0.0.1:*
  prometheus: %d
nodes:
  recv:
    plugin: receiver
    params: {address: "127.0.0.1:%d", antennas: 1, bits: 10, samples_per_chunk: 65536}
  idle:
    plugin: discard
edges:
  - recv.out -> idle.in
"""


class Slowloris:
    """n connections to port from the given source addresses (cycled), each
    sending a request head a byte at a time from one thread."""

    def __init__(self, port, sources, n):
        self.socks = []
        self.closed = set()      # indices the server has closed (or never took)
        for i in range(n):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((sources[i % len(sources)], 0))
            s.setblocking(False)
            s.connect_ex(("127.0.0.1", port))
            self.socks.append(s)
        # All at once, within one deadline: a full listen queue drops SYNs.
        pending = set(range(n))
        deadline = time.monotonic() + CONNECT_S
        while pending and time.monotonic() < deadline:
            _, ready, _ = select.select([], [self.socks[i] for i in pending], [],
                                        max(0.0, deadline - time.monotonic()))
            for s in ready:
                i = self.socks.index(s)
                pending.discard(i)
                if s.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR):
                    self.closed.add(i)
                    continue
                s.setblocking(True)
                s.settimeout(5)
                try:
                    s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                except OSError:
                    self.closed.add(i)
        self.closed |= pending
        print("%d slow clients connected, %d not" % (n - len(self.closed), len(self.closed)))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._trickle, daemon=True)
        self.thread.start()

    def _trickle(self):
        deadline = time.monotonic() + TRICKLE_MAX_S
        while not self.stop.wait(TRICKLE_S) and time.monotonic() < deadline:
            for i, s in enumerate(self.socks):
                if i in self.closed:
                    continue
                try:
                    s.sendall(b"X")
                except OSError:
                    self.closed.add(i)

    def open_count(self):
        """Connections the server has not closed: a read finds nothing yet
        (no reply to an unfinished head, no end of stream)."""
        n = 0
        for i, s in enumerate(self.socks):
            if i in self.closed:
                continue
            s.setblocking(False)
            try:
                got = s.recv(1)
                if not got:
                    self.closed.add(i)
                    continue
            except BlockingIOError:
                pass
            except OSError:
                self.closed.add(i)
                continue
            finally:
                s.setblocking(True)
            n += 1
        return n

    def close(self):
        self.stop.set()
        self.thread.join(timeout=10)
        for s in self.socks:
            s.close()


def scrape_timed(url):
    t = time.monotonic()
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as r:
            body = r.read().decode()
            status = r.status
    except OSError as x:
        fail("no scrape within %d s while slow clients hold connections: %s" % (SCRAPE_TIMEOUT_S, x))
    return status, body, time.monotonic() - t


def main():
    try:
        with socket.socket() as s:
            s.bind(("127.0.0.2", 0))
    except OSError:
        print("SKIP: cannot bind 127.0.0.2 (no 127.0.0.0/8 loopback here)")
        return 77
    tmp = tempfile.mkdtemp(prefix="cbf-prom-slow-")
    port = free_port()
    e = Engine(YAML % (port, free_port(socket.SOCK_DGRAM)), os.path.join(tmp, "slow.yaml"))
    url = "http://127.0.0.1:%d/metrics" % port
    try:
        deadline = time.monotonic() + 30
        while "metrics: Prometheus on" not in "".join(e.log):
            if time.monotonic() > deadline or not e.running():
                fail("no metrics address in the log:\n" + "".join(e.log))
            time.sleep(0.05)
        for shape, sources in (("%d addresses" % SLOW, ["127.0.0.%d" % (2 + i) for i in range(SLOW)]),
                               ("one address", ["127.0.0.2"])):
            slow = Slowloris(port, sources, SLOW)
            try:
                # No wait needed: the kernel's accept queue is first in,
                # first out, so the scrape's connection is taken after
                # every slow one (held, or closed by a limit) is.
                status, body, took = scrape_timed(url)
                held = slow.open_count()
                check(status == 200 and "cbf_engine_elapsed_seconds" in body,
                      "%d slow clients from %s: a scrape answered in %.3f s" % (SLOW, shape, took))
                if len(sources) > 1:
                    check(held == SLOW, "all %d slow clients from %s still held (%d)" % (SLOW, shape, held))
                else:
                    check(0 < held < SLOW, "slow clients from one address: %d held, %d closed by the "
                          "per-source limit" % (held, SLOW - held))
            finally:
                slow.close()
        check(e.running(), "the engine is still running")
        check(e.shutdown() == 0, "exit 0 after shutdown")
    finally:
        e.kill()
    return 0


if __name__ == "__main__":
    sys.exit(main())
