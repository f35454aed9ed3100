"""sender's capture request through cbf-ctl: a digitiser stream held back
(capture: false) sends nothing, `capture start` sends, `capture stop` holds
again, and `capture start from=T` sends nothing that starts before timestamp
T; the counters show it, read from published sensor messages."""
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import Engine, check, fail  # noqa: E402

YAML = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  sensors: tcp://127.0.0.1:*
  sensor_period: 0.05
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, bits: 8, samples_per_chunk: 65536, length: 0, noise: 0.05}
  send:
    plugin: sender
    params: {destinations: "127.0.0.1:9", rate_gbps: 0.5, capture: false}
edges:
  - dsim.out -> send.in
"""


def counters(e, cond, what):
    for _ in range(10):
        rc, out, err = e.ctl("--json", "sensors", "--watch", "--count", "20", timeout=60)
        if rc != 0:
            fail("sensors --watch: %s" % err)
        for line in out.splitlines():
            c = json.loads(line)["nodes"]["send"]["counters"]
            if cond(c):
                return c
    fail("no sensor message showed " + what)


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-send-")
    e = Engine(YAML, os.path.join(tmp, "send.yaml"))
    try:
        # Only the descriptor heaps of the start go out while held back.
        c0 = counters(e, lambda c: c["buffers_not_captured"] >= 1, "buffers held back")
        c = counters(e, lambda c: c["buffers_not_captured"] >= c0["buffers_not_captured"] + 3,
                     "more buffers held back")
        check(c["heaps"] == c0["heaps"], "capture: false sends nothing (%d buffers held, %d "
              "descriptor heaps)" % (c["buffers_not_captured"], c["heaps"]))
        rc, out, err = e.ctl("capture", "start")
        check(rc == 0 and "capture: started" in out, "cbf-ctl capture start")
        counters(e, lambda c: c["heaps"] > c0["heaps"] + 10, "heaps sent")
        rc, out, err = e.ctl("capture", "stop")
        check(rc == 0 and "capture: stopped" in out, "cbf-ctl capture stop")
        sent = int(out.split("heaps: ")[1].split()[0])
        held = counters(e, lambda c: True, "counters")["buffers_not_captured"]
        c = counters(e, lambda c: c["buffers_not_captured"] >= held + 3, "more buffers held back")
        check(c["heaps"] == sent, "nothing sent after capture stop (%d heaps sent before)" % sent)
        # katgpucbf's capture-start STREAM TIMESTAMP: nothing that starts
        # before the timestamp goes out. T lies about 1000 buffers (some
        # seconds at this rate) past the stream's next one.
        T = c["tx.next_timestamp"] + 1000 * 65536
        rc, reply, err = e.request({"request": "capture", "node": "send", "action": "start", "from": T})
        check(rc == 0 and reply.get("from") == T, "capture action=start from=T: %s%s" % (reply, err))
        before = []

        def past(c):
            if c["tx.next_timestamp"] <= T:
                before.append(c)
            return c["heaps"] > sent

        c = counters(e, past, "heaps sent once the stream passed the timestamp")
        check(before, "sensor messages seen while the stream was before the timestamp")
        check(all(b["heaps"] == sent for b in before),
              "nothing sent before the timestamp (%d messages, heaps %s)" % (len(before),
                                                                           sorted({b["heaps"] for b in before})))
        check(c["tx.next_timestamp"] > T, "sending began past the timestamp (next %d > %d)" %
              (c["tx.next_timestamp"], T))
        check(e.shutdown() == 0, "exit 0 after shutdown")
    finally:
        e.kill()


if __name__ == "__main__":
    main()
