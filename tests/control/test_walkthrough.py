"""docs/control.md's walk-through, through cbf-run and cbf-ctl: an endless
F-engine (pipelines/feng-control.yaml, smaller) takes a gain, a delay model
and capture start/stop from cbf-ctl while it runs, publishes sensors
(digitiser power among them), and drains to exit 0 on shutdown; the HDF5
file holds exactly the buffers written while capturing. Every wait is on a
sensor message or a reply, bounded by a timeout."""
import json
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_CTL, Engine, check, fail  # noqa: E402


def main():
    src = os.environ.get("CBF_SOURCE_ROOT", ".")
    with open(os.path.join(src, "pipelines", "feng-control.yaml")) as f:
        text = f.read()
    tmp = tempfile.mkdtemp(prefix="cbf-walk-")
    h5 = os.path.join(tmp, "feng-control.h5")
    # Smaller and faster than the shipped file, on ports the system picks.
    text = (text.replace("control: 5555", 'control: "tcp://127.0.0.1:*"')
                .replace("sensors: 5556", 'sensors: "tcp://127.0.0.1:*"')
                .replace("sensor_period: 1.0", "sensor_period: 0.1")
                .replace("gpu: auto", "gpu: none")
                .replace("samples_per_chunk: 1048576", "samples_per_chunk: 65536")
                .replace("channels: 4096, taps: 16, spectra_per_buffer: 256",
                         "channels: 256, taps: 16, spectra_per_buffer: 64")
                .replace("spectra_per_heap: 256", "spectra_per_heap: 64")
                .replace("max_buffers: 64", "max_buffers: 0")
                .replace("path: feng-control.h5", "path: " + h5))
    e = Engine(text, os.path.join(tmp, "feng-control.yaml"))
    try:
        run(e, h5)
    finally:
        e.kill()


def sensors_until(e, cond, what, limit=200):
    """Reads published sensor messages until cond(message) holds."""
    for _ in range(limit // 20):
        rc, out, err = e.ctl("--json", "sensors", "--watch", "--count", "20", timeout=60)
        if rc != 0:
            fail("sensors --watch: %s" % err)
        for line in out.splitlines():
            m = json.loads(line)
            if cond(m):
                return m
    fail("no sensor message showed %s" % what)


def run(e, h5):
    # cbf-inspect lists a plugin's requests with their arguments.
    inspect = os.path.join(os.path.dirname(CBF_CTL), "cbf-inspect")
    r = subprocess.run([inspect, "fft_post"], capture_output=True, text=True, timeout=30)
    check(r.returncode == 0 and "Requests" in r.stdout and "gain: set the complex gains" in r.stdout
          and "values" in r.stdout, "cbf-inspect fft_post lists the gain request")
    rc, out, err = e.ctl("requests")
    check(rc == 0 and "gain (node fft_post)" in out and "delays (node pfb)" in out
          and "capture (node sink)" in out, "requests lists gain, delays and capture")

    rc, out, err = e.ctl("gain", "0.01")
    check(rc == 0 and "at:" in out and "spectrum:" in out, "cbf-ctl gain 0.01: %s" % out.replace("\n", ", "))
    rc, out, err = e.ctl("gain", "--pol", "1", "0.008", "0.006")
    check(rc == 0, "cbf-ctl gain --pol 1 0.008 0.006")
    rc, out, err = e.ctl("gain", "1", "2", "3")
    check(rc == 1 and "3 values" in err, "cbf-ctl gain with 3 values refused: %s" % err.strip())
    rc, out, err = e.ctl("gain")
    check(rc == 0 and out.startswith("pol0: ") and "\npol1: " in out, "cbf-ctl gain: %s" % out.replace("\n", ", "))
    rc, out, err = e.ctl("gain", "default")
    check(rc == 0 and "pending:" in out, "cbf-ctl gain default: %s" % out.replace("\n", ", "))
    rc, out, err = e.ctl("gain", "--cancel")
    check(rc == 0 and "replaced:" in out, "cbf-ctl gain --cancel: %s" % out.replace("\n", ", "))
    rc, out, err = e.ctl("delays", "2.5e-9", "1e-12", "0.3", "0.1")
    check(rc == 0 and "coarse_delay: 4" in out, "cbf-ctl delays: %s" % out.replace("\n", ", "))
    rc, out, err = e.ctl("delays", "1", "0", "0", "0")
    check(rc == 1 and "2^24 samples" in err, "a 1 s delay refused: %s" % err.strip())
    rc, out, err = e.ctl("delays", "--cancel")
    check(rc == 0 and "replaced:" in out, "cbf-ctl delays --cancel: %s" % out.replace("\n", ", "))

    m = sensors_until(e, lambda m: m["nodes"]["pfb"]["gauges"].get("rms_dbfs_pol0") is not None,
                      "digitiser power")
    dbfs = m["nodes"]["pfb"]["gauges"]["rms_dbfs_pol0"]
    # dsim: tone 0.2 and noise 0.02 of full scale: RMS ~ 0.2/sqrt(2) -> about -17 dBFS.
    check(-20 < dbfs < -14, "digitiser power published: %.1f dBFS" % dbfs)
    check(m["nodes"]["sink"]["counters"]["buffers_written"] == 0, "nothing written before capture")

    rc, out, err = e.ctl("capture", "start")
    check(rc == 0 and "capture: started" in out, "cbf-ctl capture start")
    sensors_until(e, lambda m: m["nodes"]["sink"]["counters"]["buffers_written"] >= 3,
                  "buffers written")
    rc, out, err = e.ctl("capture", "stop")
    check(rc == 0 and "capture: stopped" in out, "cbf-ctl capture stop")
    written = int(out.split("buffers_written: ")[1].split()[0])
    m = sensors_until(e, lambda m: m["nodes"]["sink"]["counters"]["buffers_dropped"] > 0 and
                      m["nodes"]["fft_post"]["buffers_out"] > m["nodes"]["sink"]["buffers_in"] - 1,
                      "buffers dropped after stop")
    m = sensors_until(e, lambda m: m["nodes"]["sink"]["buffers_in"] >= written + 5, "more input")
    check(m["nodes"]["sink"]["counters"]["buffers_written"] == written,
          "no buffer written after capture stop (%d written)" % written)

    rc, out, err = e.ctl("log-level")
    check(rc == 0 and "level: info" in out, "cbf-ctl log-level")
    code = e.shutdown()
    check(code == 0, "exit 0 after cbf-ctl shutdown")
    log = "".join(e.log)
    check("wrote %s:/fft_post/data [%d," % (h5, written) in log,
          "the file holds the %d buffers written while capturing" % written)


if __name__ == "__main__":
    main()
