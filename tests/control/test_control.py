"""Control plane through a real cbf-run: built-in requests, a bad request of
each kind (each gets an error saying what was wrong and leaves the engine
running unchanged), sensors published at the period asked (30 consecutive
messages span 29 periods of engine time), a request too long to read (no
answer, the engine runs on), a warning when control binds beyond loopback,
and a clean shutdown (exit 0)."""
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_CTL, Engine, check, fail, free_port  # noqa: E402

PERIOD = 0.1

YAML = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  sensors: tcp://127.0.0.1:*
  sensor_period: %g
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, bits: 10, samples_per_chunk: 65536, length: 0, noise: 0.05}
  pfb:
    plugin: pfb
    params: {channels: 256, taps: 4, spectra_per_buffer: 64}
  post:
    plugin: fft_post
    params: {spectra_per_heap: 64, gain: [0.1, 0.0]}
  sink:
    plugin: filesink
    params: {path: %s, overwrite: true, max_buffers: 2}
edges:
  - dsim.out -> pfb.in
  - pfb.out -> post.in
  - post.out -> sink.in
"""


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-control-")
    e = Engine(YAML % (PERIOD, os.path.join(tmp, "out.h5")), os.path.join(tmp, "engine.yaml"))
    try:
        run(e)
    finally:
        e.kill()
    # Bound beyond loopback: the engine says so, loudly.
    wide = YAML.replace("control: tcp://127.0.0.1:*", "control: tcp://0.0.0.0:*")
    e = Engine(wide % (PERIOD, os.path.join(tmp, "wide.h5")), os.path.join(tmp, "wide.yaml"))
    try:
        check(any("beyond this host's loopback" in line for line in e.log),
              "control on 0.0.0.0 warns that anyone who can reach it can change the engine")
        check(e.shutdown() == 0, "and it still answers")
    finally:
        e.kill()


def run(e):
    rc, reply, err = e.request({"request": "requests"})
    names = [r["name"] for r in reply["requests"]] if reply else []
    check(rc == 0 and {"requests", "sensors", "log-level", "shutdown"} <= set(names),
          "requests lists the built-ins: %s" % names)
    rc, out, err = e.ctl("requests")
    check(rc == 0 and "shutdown: drain" in out, "cbf-ctl requests prints them readably")

    rc, reply, err = e.request({"request": "sensors"})
    check(rc == 0 and set(reply["sensors"]["nodes"]) == {"dsim", "pfb", "post", "sink"}
          and reply["publish"] == e.sensors, "sensors read over REQ, with the PUB endpoint")
    pfb = reply["sensors"]["nodes"]["pfb"]
    check("pfb.in" in pfb["queues"] and pfb["queues"]["pfb.in"]["depth"] == 4
          and "spectra" in pfb["counters"], "a node's sensors hold queue fill and counters")

    rc, reply, err = e.request({"request": "log-level"})
    check(rc == 0 and reply["level"] == "info", "log-level reads the level")
    rc, reply, err = e.request({"request": "log-level", "level": "debug"})
    check(rc == 0 and reply["level"] == "debug", "log-level sets the level")

    bad = [
        ("{", "not valid JSON"),
        ("[1, 2]", "expected a JSON object"),
        ('{"level": "info"}', 'no "request"'),
        ('{"request": 5}', 'no "request"'),
        ('{"request": "warp-drive"}', "unknown request 'warp-drive'"),
        ('{"request": "log-level", "level": "loud"}', "expected one of error"),
        ('{"request": "log-level", "level": 3}', "expected one of error"),
        ('{"request": "sensors", "node": "pfb"}', "takes no argument 'node'"),
        ('{"request": "shutdown", "now": true}', "takes no argument 'now'"),
        ('{"request": "sensors", "request": "shutdown"}', "duplicate"),
        ('{"request": "requests", "node": 3}', '"node" must be a string'),
    ]
    for text, want in bad:
        rc, out, err = e.ctl("raw", text)
        check(rc == 1 and want in err, "refused %s: %s" % (text, err.strip()))
        check(e.running(), "engine still running after %s" % text)
    rc, reply, err = e.request({"request": "log-level"})
    check(rc == 0 and reply["level"] == "debug", "bad requests left the log level as it was")

    # Long requests through standard input: 4 MB is read and answered (an
    # argument it does not take); 9 MB is beyond CBF_CONTROL_MAX_REQUEST and
    # never read (no answer), and the engine answers the next client.
    def raw_stdin(text, wait):
        return subprocess.run([CBF_CTL, "-e", e.control, "-t", str(wait), "raw", "-"], input=text,
                              capture_output=True, text=True, timeout=60)
    r = raw_stdin('{"request": "requests", "pad": "%s"}' % ("x" * (4 << 20)), 20)
    check(r.returncode == 1 and "takes no argument 'pad'" in r.stderr, "a 4 MB request is read and refused")
    r = raw_stdin('{"request": "requests", "pad": "%s"}' % ("x" * (9 << 20)), 2)
    check(r.returncode == 3 and e.running(), "a 9 MB request is not read (no answer); the engine runs on")
    rc, reply, err = e.request({"request": "log-level"})
    check(rc == 0 and reply["level"] == "debug", "the next request is answered")

    # Nothing listening is exit 3, said as soon as the connection is
    # refused (not after the whole timeout: the message tells which).
    for ep in ("tcp://127.0.0.1:%d" % free_port(), "ipc://" + os.path.join(tempfile.mkdtemp(), "none")):
        t0 = time.monotonic()
        r = subprocess.run([CBF_CTL, "-e", ep, "-t", "20", "sensors"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 3 and "nothing answers at %s: connection refused" % ep in r.stderr,
              "no engine at %s: exit 3 after %.2f s, '%s'" % (ep, time.monotonic() - t0, r.stderr.strip()))
    # A misspelt request: unknown, with the nearest one named.
    rc, out, err = e.ctl("gian")
    check(rc == 1 and "unknown request 'gian' (did you mean 'gain'?)" in err, "cbf-ctl gian: '%s'" % err.strip())
    r = subprocess.run([CBF_CTL, "-e", e.control, "delays", "1", "2"], capture_output=True, text=True, timeout=20)
    check(r.returncode == 2, "usage error (delays with two values): exit 2")

    # Sensors: N consecutive messages span (N - 1) periods of engine time.
    # Tolerance 15%: the stamps are taken when each message leaves, so a
    # stall of the control thread at either end shifts the span (a stall in
    # between is caught up and does not change the count).
    n_msgs = 30
    rc, out, err = e.ctl("--json", "sensors", "--watch", "--count", str(n_msgs), timeout=60)
    check(rc == 0, "sensors --watch received %d messages" % n_msgs)
    msgs = [json.loads(line) for line in out.splitlines()]
    seqs = [m["seq"] for m in msgs]
    check(seqs == list(range(seqs[0], seqs[0] + len(seqs))), "sensor messages are consecutive")
    span = msgs[-1]["elapsed_s"] - msgs[0]["elapsed_s"]
    ratio = (n_msgs - 1) * PERIOD / span
    check(0.85 <= ratio <= 1.15, "%d messages over %.2f s of engine time at a %g s period "
          "(expected %.1f s)" % (n_msgs, span, PERIOD, (n_msgs - 1) * PERIOD))
    check(all(m["nodes"]["dsim"]["buffers_out"] > 0 for m in msgs[1:]), "counters are live")
    rate = msgs[-1]["nodes"]["dsim"].get("buffers_out_per_s", 0)
    check(rate > 0, "rates published (dsim %.1f buffers/s)" % rate)

    rc, out, err = e.ctl("sensors")
    check(rc == 0 and "queue pfb.in" in out, "cbf-ctl sensors prints a table")

    code = e.shutdown()
    check(code == 0, "engine drained and exited 0 after shutdown")
    if "shutdown requested" not in "".join(e.log):
        fail("no shutdown line in the log")


if __name__ == "__main__":
    main()
