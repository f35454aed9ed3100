"""Sensor status, device-status and read_only through a real cbf-run, seen
alike by the ZeroMQ sensor message (cbf-ctl), katcp (aiokatcp) and
Prometheus (prometheus_client's parser):

- a quiet digitiser (noise at -26 dBFS) is nominal and the engine's
  device-status is ok; a `signals` request that makes it loud (noise at
  full scale) turns the digitiser RMS gauge `warn` (outside -30..-10 dBFS,
  katgpucbf's rule), the digitiser's clip counter `warn` (rising), device-status
  `degraded`; a quiet signal again brings the RMS back to nominal;
- a katcp client sampling the RMS sensor on `event` gets the status change
  as a #sensor-status inform;
- a receiver losing packets reports rx.synchronised = 0 in `error`, and
  device-status `fail`;
- an engine with `read_only: true` answers sensors but refuses the
  requests that change the signal path (signals, shutdown, ?halt) with the
  reason, and keeps running; a read_only that is not a YAML boolean is
  refused at its line."""
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_RUN, Engine, check, fail, feng_yaml, free_port  # noqa: E402

try:
    import aiokatcp
    from prometheus_client.parser import text_string_to_metric_families
except ImportError as exc:
    print("SKIP: %s (scripts/setup.sh installs aiokatcp and prometheus_client)" % exc)
    sys.exit(77)

CHUNK = 65536
RATE = 25 * CHUNK           # dsim releases 25 chunks a second (realtime)
DEADLINE = 60               # seconds any one status change may take to show

LOUD_YAML = feng_yaml(
    dsim="antennas: 1, bits: 10, samples_per_chunk: %d, length: 0, noise: 0.05, tones: [], "
         "realtime: true, adc_sample_rate: %g",
    pfb="channels: 256, taps: 4, spectra_per_buffer: 64",
    post="spectra_per_heap: 64, gain: [0.03, 0.0]",
    engine=["katcp: 127.0.0.1:0", "prometheus: 127.0.0.1:%d"])

LOSSY_YAML = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
  prometheus: 127.0.0.1:%d
  read_only: true
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, bits: 10, samples_per_chunk: %d, length: 0, noise: 0.05,
             realtime: true, adc_sample_rate: %g}
  send:
    plugin: sender
    params: {destinations: "127.0.0.1:%d", rate_gbps: 0.5}
  recv:
    plugin: receiver
    params: {address: "127.0.0.1:%d", antennas: 1, bits: 10, samples_per_chunk: %d,
             drop_rate: 0.2}
  sink:
    plugin: discard
edges:
  - dsim.out -> send.in
  - recv.out -> sink.in
"""



def zmq_sensors(e):
    rc, reply, err = e.request({"request": "sensors"})
    if rc != 0:
        fail("sensors request: %s" % err)
    return reply["sensors"]


def status_of(msg, node, name):
    n = msg["nodes"][node]
    return n["status"].get(name), n["updated"].get(name)


def scrape(port):
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=10) as r:
        text = r.read().decode()
    out = {}
    for fam in text_string_to_metric_families(text):
        for s in fam.samples:
            out[(s.name, s.labels.get("node"), s.labels.get("sensor"))] = s.value
    return out


def wait_for(what, probe):
    """Polls probe() (no sleeping between tries beyond a short pause, bounded
    by DEADLINE) until it returns a true value, which is returned."""
    end = time.monotonic() + DEADLINE
    while time.monotonic() < end:
        v = probe()
        if v:
            return v
        time.sleep(0.1)
    fail("within %d s: %s" % (DEADLINE, what))


def katcp_status(e, name):
    async def go():
        client = await aiokatcp.Client.connect(*e.katcp)
        try:
            _, informs = await client.request("sensor-value", name)
            a = informs[0].arguments
            return float(a[0]), a[3].decode(), a[4].decode()
        finally:
            client.close()
            await client.wait_closed()
    return asyncio.run(go())


def loud_engine(tmp):
    prom = free_port()
    e = Engine(LOUD_YAML % (prom, CHUNK, RATE), os.path.join(tmp, "loud.yaml"))
    e.prom = prom
    try:
        # quiet: nominal everywhere, device ok
        m = wait_for("the digitiser RMS has a value", lambda: (lambda m: m if status_of(
            m, "pfb", "rms_dbfs_pol0")[0] != "unknown" else None)(zmq_sensors(e)))
        rms = m["nodes"]["pfb"]["gauges"]["rms_dbfs_pol0"]
        check(-30 <= rms <= -10 and status_of(m, "pfb", "rms_dbfs_pol0")[0] == "nominal",
              "quiet digitiser: RMS %.1f dBFS is nominal" % rms)
        m = wait_for("device-status ok while quiet",
                     lambda: (lambda m: m if m["device-status"]["value"] == "ok" else None)(zmq_sensors(e)))
        check(m["device-status"]["status"] == "nominal", "device-status ok (nominal) while quiet")
        t, st, v = katcp_status(e, "device-status")
        check((st, v) == ("nominal", "ok"), "katcp device-status ok, nominal")
        _, st, _ = katcp_status(e, "pfb.rms-dbfs-pol0")
        check(st == "nominal", "katcp: pfb.rms-dbfs-pol0 nominal")
        s = scrape(e.prom)
        check(s.get(("cbf_device_status", None, None)) == 0 and
              s.get(("cbf_sensor_status", "pfb", "rms_dbfs_pol0")) == 1,
              "Prometheus: cbf_device_status 0, the RMS sensor's status 1 (nominal)")
        before = time.time()

        # a katcp client watching the RMS sensor on change
        async def watch_and_shout():
            client = await aiokatcp.Client.connect(*e.katcp)
            got = asyncio.get_running_loop().create_future()

            def on_status(timestamp: float, count: int, name: str, status: str, value: str):
                if name == "pfb.rms-dbfs-pol0" and status == "warn" and not got.done():
                    got.set_result((timestamp, name, status, value))
            client.add_inform_callback("sensor-status", on_status)
            try:
                await client.request("sensor-sampling", "pfb.rms-dbfs-pol0", "event")
                rc, out, err = await asyncio.to_thread(e.ctl, "signals", "noise=1.0")
                if rc != 0:
                    fail("signals noise=1.0: %s %s" % (out, err))
                return await asyncio.wait_for(got, DEADLINE)
            finally:
                client.close()
                await client.wait_closed()
        a = asyncio.run(watch_and_shout())
        check(a[0] >= before - 1, "#sensor-status pfb.rms-dbfs-pol0 warn (value %s dBFS) stamped "
              "with the time it changed" % a[3])
        m = wait_for("loud digitiser: clip counters warn and device-status degraded",
                     lambda: (lambda m: m if m["device-status"]["value"] == "degraded" and
                              status_of(m, "dsim", "saturated")[0] == "warn" else None)(zmq_sensors(e)))
        check(status_of(m, "pfb", "rms_dbfs_pol0")[0] == "warn" and
              m["nodes"]["pfb"]["gauges"]["rms_dbfs_pol0"] > -10,
              "loud: RMS %.1f dBFS is warn" % m["nodes"]["pfb"]["gauges"]["rms_dbfs_pol0"])
        check(m["nodes"]["dsim"]["counters"]["saturated"] > 0, "loud: the digitiser's clip count rising is warn")
        upd = status_of(m, "dsim", "saturated")[1]
        check(upd is not None and upd >= before - 1, "the clip counter's update time is after the change")
        s = scrape(e.prom)
        check(s.get(("cbf_device_status", None, None)) == 1 and
              s.get(("cbf_sensor_status", "dsim", "saturated")) == 2,
              "Prometheus: cbf_device_status 1 (degraded), clip counter status 2 (warn)")
        rc, out, _ = e.ctl("sensors")
        check(rc == 0 and "[warn]" in out and "device-status degraded (warn)" in out,
              "cbf-ctl sensors marks the warn sensors and shows device-status degraded")

        # quiet again: the RMS is nominal again
        rc, out, err = e.ctl("signals", "noise=0.05")
        check(rc == 0, "signals noise=0.05 accepted")
        wait_for("RMS nominal again once quiet",
                 lambda: status_of(zmq_sensors(e), "pfb", "rms_dbfs_pol0")[0] == "nominal")
        print("ok: RMS nominal again once the digitiser is quiet")
        check(e.shutdown() == 0, "exit 0 after shutdown")
    finally:
        e.kill()


def lossy_read_only_engine(tmp):
    prom, udp = free_port(), free_port(socket.SOCK_DGRAM)
    e = Engine(LOSSY_YAML % (prom, CHUNK, RATE, udp, udp, CHUNK), os.path.join(tmp, "lossy.yaml"))
    e.prom = prom
    try:
        # packets flow first (a receiver that has none yet also sends empty,
        # flagged chunks), so the error below is the loss's
        wait_for("the receiver gets packets",
                 lambda: zmq_sensors(e)["nodes"]["recv"]["counters"]["packets"] > 0)
        m = wait_for("receiver losing packets: rx.synchronised in error",
                     lambda: (lambda m: m if status_of(m, "recv", "rx.synchronised")[0] == "error"
                              else None)(zmq_sensors(e)))
        check(m["nodes"]["recv"]["gauges"]["rx.synchronised"] == 0, "rx.synchronised = 0 while data is missing")
        check(m["device-status"] == {"value": "fail", "status": "error"}, "device-status fail (error)")
        _, st, v = katcp_status(e, "recv.rx.synchronised")
        check(st == "error" and float(v) == 0, "katcp: recv.rx.synchronised error 0")
        _, st, v = katcp_status(e, "device-status")
        check((st, v) == ("error", "fail"), "katcp: device-status fail")
        s = scrape(prom)
        check(s.get(("cbf_device_status", None, None)) == 2 and
              s.get(("cbf_sensor_status", "recv", "rx.synchronised")) == 3,
              "Prometheus: cbf_device_status 2 (fail), rx.synchronised status 3 (error)")

        # read_only: reading works, changing is refused, the engine goes on
        rc, reply, err = e.request({"request": "signals", "node": "dsim", "noise": 0.5})
        check(rc == 1 and "read-only" in err and "engine.read_only: true" in err,
              "read_only: signals refused (%s)" % err.strip())
        rc, reply, err = e.request({"request": "shutdown"})
        check(rc == 1 and "read-only" in err, "read_only: shutdown refused")

        async def halt():
            client = await aiokatcp.Client.connect(*e.katcp)
            try:
                await client.request("halt")
            except aiokatcp.FailReply as exc:
                return str(exc)
            finally:
                client.close()
                await client.wait_closed()
            return None
        said = asyncio.run(halt())
        check(said is not None and "read-only" in said, "read_only: ?halt refused (%s)" % said)
        check(e.running() and zmq_sensors(e)["nodes"]["recv"]["counters"]["packets"] > 0,
              "read_only engine still running and answering sensors")
        e.proc.send_signal(signal.SIGTERM)
        check(e.proc.wait(timeout=60) == 0, "read_only engine exits 0 on SIGTERM")
    finally:
        e.kill()


def bad_read_only(tmp):
    path = os.path.join(tmp, "bad.yaml")
    with open(path, "w") as f:
        f.write(LOSSY_YAML.replace("read_only: true", "read_only: 'yes'") % (1, CHUNK, RATE, 9, 9, CHUNK))
    r = subprocess.run([CBF_RUN, path], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and "bad.yaml:7:" in r.stderr and "engine.read_only: expected true or false"
          in r.stderr, "read_only: 'yes' refused at its line, exit 2 (%s)" % r.stderr.strip()[:160])


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-status-")
    bad_read_only(tmp)
    lossy_read_only_engine(tmp)
    loud_engine(tmp)


if __name__ == "__main__":
    main()
