"""Prometheus /metrics through a real cbf-run (engine key `prometheus:`),
scraped with urllib and read with prometheus_client's own parser:

- every family has HELP and TYPE, counters are `_total`, every sample is
  labelled by engine, node and plugin; katgpucbf's names where they apply
  (input_heaps, input_missing_heaps, output_clipped_samples{pol}, ...);
  timestamps (steady_state_timestamp, rx.timestamp) are gauges, the
  configuration values (dither, dither_key, period) labels of
  cbf_node_config_info, and every gauge has help of its own;
- counters grow between two scrapes while data flows, never fall, and once
  a finite branch of the graph has finished they equal the end-of-run table
  cbf-run prints;
- a wrong path, a wrong method, garbage, an oversized head and a client that
  hangs up mid-request each get an HTTP error or a closed connection, and
  the engine keeps running and serving;
- `prometheus: PORT` listens on 127.0.0.1 only (/proc/net/tcp, tcp6), and
  `"[::1]:0"` on ::1 only, at a port the system picked;
- a malformed address or a port already taken stops the start with an
  error naming engine.prometheus."""
import math
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_RUN, Engine, check, fail, feng_yaml, free_port  # noqa: E402

try:
    from prometheus_client.parser import text_string_to_metric_families
except ImportError:
    print("SKIP: prometheus_client is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

CHUNK = 65536
CHUNKS = 75                 # 3 s at 25 chunks/s: long enough for two scrapes apart
RATE = 25 * CHUNK           # adc_sample_rate: dsim releases 25 chunks a second

# Two branches: dsim -> pfb -> fft_post -> discard ends after CHUNKS chunks;
# the receiver gets no packets and keeps the engine running until shutdown,
# so the finished branch's counts can be scraped and compared at leisure.
ENGINE_NAME = 'fe "0"\\x'
YAML = feng_yaml(
    dsim="antennas: 1, bits: 10, samples_per_chunk: %d, length: %d, noise: 0.05, realtime: true, "
         "adc_sample_rate: %g",
    pfb="channels: 256, taps: 4, spectra_per_buffer: 64",
    post="spectra_per_heap: 64, gain: [50.0, 0.0]",
    engine=["name: '%s'" % ENGINE_NAME, "prometheus: %s"],
    nodes=['recv: {plugin: receiver, params: {address: "127.0.0.1:%d", antennas: 1, bits: 10, '
           'samples_per_chunk: %d}}',
           "idle: {plugin: discard}"],
    edges=["recv.out -> idle.in"])
FINITE = ("dsim", "pfb", "post", "sink")
TIMESTAMPS = ("steady_state_timestamp", "rx.timestamp", "tx.next_timestamp")
PLUGINS = {"dsim": "dsim", "pfb": "pfb", "post": "fft_post", "sink": "discard",
           "recv": "receiver", "idle": "discard"}



def scrape(url):
    with urllib.request.urlopen(url, timeout=10) as r:
        check(r.status == 200 and r.headers["Content-Type"].startswith("text/plain; version=0.0.4"),
              "GET /metrics: 200, text format 0.0.4")
        return r.read().decode()


def parse(text):
    """{(sample name, frozen labels): value} and {family name: type}."""
    samples, types = {}, {}
    for fam in text_string_to_metric_families(text):
        types[fam.name] = fam.type
        for s in fam.samples:
            if s.name.endswith("_created"):
                continue
            key = (s.name, tuple(sorted(s.labels.items())))
            if key in samples:
                fail("sample %s%s twice" % key)
            samples[key] = s.value
    return samples, types


def value(samples, name, node, **extra):
    want = dict(engine=ENGINE_NAME, node=node, plugin=PLUGINS[node], **extra)
    return samples.get((name, tuple(sorted(want.items()))))


def check_format(text, samples, types):
    lines = text.splitlines()
    helps = [ln.split()[2] for ln in lines if ln.startswith("# HELP ")]
    typed = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ")]
    check(helps == typed and len(set(helps)) == len(helps),
          "each of %d families has one HELP and one TYPE line" % len(helps))
    counters = [ln.split()[2] for ln in lines if ln.startswith("# TYPE ") and ln.endswith(" counter")]
    check(counters and all(c.endswith("_total") for c in counters), "counters are named *_total")
    check(all(t in ("counter", "gauge") for t in types.values()), "only counters and gauges")
    nodes = {dict(k[1]).get("node") for k in samples
             if k[0] not in ("cbf_engine_elapsed_seconds", "cbf_device_status")}
    check(nodes == set(PLUGINS), "every node has samples: %s" % sorted(nodes))
    check(all(dict(k[1]).get("engine") == ENGINE_NAME for k in samples),
          "the engine label carries the escaped name back intact")
    for name, node, extra in (("cbf_node_buffers_in_total", "pfb", {}),
                              ("cbf_node_busy_seconds_total", "post", {}),
                              ("cbf_node_wait_input_seconds_total", "sink", {}),
                              ("cbf_node_wait_output_seconds_total", "dsim", {}),
                              ("cbf_queue_fill", "pfb", {"queue": "pfb.in"}),
                              ("cbf_queue_depth", "pfb", {"queue": "pfb.in"}),
                              ("cbf_samples_total", "dsim", {}),
                              ("cbf_spectra_total", "pfb", {}),
                              ("cbf_rms_dbfs_pol0", "pfb", {}),
                              ("cbf_output_clipped_samples_total", "post", {"pol": "0"}),
                              ("cbf_output_clipped_samples_total", "post", {"pol": "1"}),
                              ("cbf_input_heaps_total", "recv", {}),
                              ("cbf_input_missing_heaps_total", "recv", {}),
                              ("cbf_input_too_old_heaps_total", "recv", {}),
                              ("cbf_input_chunks_total", "recv", {})):
        check(value(samples, name, node, **extra) is not None,
              "%s{node=%s%s} is there" % (name, node, "".join(",%s=%s" % i for i in extra.items())))
    check(value(samples, "cbf_queue_depth", "pfb", queue="pfb.in") == 4, "queue depth 4 (the default)")
    check(types.get("cbf_queue_fill") == "gauge" and types.get("cbf_input_heaps") == "counter",
          "queue fill is a gauge, a node counter a counter")
    check_meanings(text, samples)


def check_meanings(text, samples):
    """Timestamps are gauges, configuration values labels of an info
    metric, and every gauge has help of its own (issue 31 item 18)."""
    fams = {f.name: f for f in text_string_to_metric_families(text)}
    ss = fams.get("cbf_steady_state_timestamp")
    check(ss is not None and ss.type == "gauge" and "steady-state-timestamp" in ss.documentation
          and "cbf_steady_state_timestamp_total" not in text,
          "steady_state_timestamp is a gauge with its meaning as help (%s)"
          % ((ss.type, ss.documentation) if ss else None,))
    check(value(samples, "cbf_steady_state_timestamp", "post") == 0, "post's steady state is 0 (no request yet)")
    rx = fams.get("cbf_rx_timestamp")
    check(rx is not None and rx.type == "gauge" and "ADC timestamp" in rx.documentation,
          "the receiver's rx.timestamp is a gauge (%s)" % (rx.type if rx else None,))
    info = fams.get("cbf_node_config_info")
    check(info is not None and info.type == "gauge" and "dither" in info.documentation
          and "period" in info.documentation,
          "cbf_node_config_info: a gauge whose help names its labels (%s)" % (info.documentation if info else None,))
    conf = {s.labels["node"]: s for s in (info.samples if info else [])}
    post, dsim = conf.get("post"), conf.get("dsim")
    check(post is not None and post.value == 1 and post.labels.get("dither") == "true"
          and post.labels.get("dither_key") == "1",
          "post's dither and dither_key are labels of cbf_node_config_info (%s)" % (post.labels if post else None,))
    check(dsim is not None and dsim.value == 1 and dsim.labels.get("period") == "0",
          "dsim's period is a label of cbf_node_config_info (%s)" % (dsim.labels if dsim else None,))
    check(not {"cbf_dither", "cbf_dither_key", "cbf_period"} & set(fams),
          "no configuration value is a gauge of its own")
    generic = [f.name for f in fams.values() if f.type == "gauge" and f.documentation.startswith("node gauge")]
    check(not generic, "every gauge of these plugins has help of its own (generic: %s)" % generic)


def config_of(samples, node):
    """The labels of node's cbf_node_config_info, as numbers."""
    for (name, labels), v in samples.items():
        d = dict(labels)
        if name == "cbf_node_config_info" and d.get("node") == node:
            return {k: {"true": 1.0, "false": 0.0}.get(x, None) if x in ("true", "false") else float(x)
                    for k, x in d.items() if k not in ("engine", "node", "plugin")}
    return {}


def counters_of(samples):
    return {k: v for k, v in samples.items() if k[0].endswith("_total")}


def listening(port):
    """Local addresses listening on TCP `port` (from /proc/net/tcp and tcp6)."""
    found = []
    for path in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(path) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            local, state = row.split()[1], row.split()[3]
            addr, p = local.split(":")
            if state == "0A" and int(p, 16) == port:
                found.append((path.rsplit("/", 1)[1], addr))
    return found


def raw(port, data, wait_reply=True):
    """Sends data on a fresh connection; returns what comes back until close."""
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    try:
        try:
            s.sendall(data)
            if not wait_reply:
                return b""
            s.shutdown(socket.SHUT_WR)
        except OSError:
            pass   # the server answered and closed (or reset) before taking all of it
        out = b""
        while True:
            try:
                b = s.recv(65536)
            except OSError:
                break
            if not b:
                break
            out += b
        return out
    finally:
        s.close()


def status_of(reply):
    m = re.match(rb"HTTP/1\.[01] (\d{3})", reply)
    return int(m.group(1)) if m else None


def bad_requests(e, port, url):
    try:
        urllib.request.urlopen(url.replace("/metrics", "/nope"), timeout=10)
        fail("a wrong path was served")
    except urllib.error.HTTPError as x:
        check(x.code == 404, "wrong path: 404")
    try:
        urllib.request.urlopen(urllib.request.Request(url, data=b"x=1", method="POST"), timeout=10)
        fail("POST was served")
    except urllib.error.HTTPError as x:
        check(x.code == 405 and "GET" in x.headers.get("Allow", ""), "POST: 405 with Allow: GET, HEAD")
    r = raw(port, b"garbage\r\n\r\n")
    check(status_of(r) == 400 or r == b"", "garbage: 400 or closed (%r)" % r[:40])
    r = raw(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\nX-Long: " + b"a" * 100000 + b"\r\n\r\n")
    check(r == b"" or (status_of(r) or 0) >= 400, "a 100 kB head: an HTTP error or closed (%r)" % r[:40])
    r = raw(port, b"\x00\xff\x16\x03\x01binary\r\n\r\n")
    check(r == b"" or (status_of(r) or 0) >= 400, "binary bytes: an HTTP error or closed (%r)" % r[:40])
    raw(port, b"GET /metr", wait_reply=False)   # hangs up mid-request
    r = raw(port, b"HEAD /metrics HTTP/1.0\r\n\r\n")
    check(status_of(r) == 200 and r.endswith(b"\r\n\r\n"), "HEAD: 200 and no body")
    check(e.running(), "the engine is still running after the bad requests")
    scrape(url)


def start_errors(tmp, taken):
    line = YAML.splitlines().index("  prometheus: %s") + 1     # where the refusal must point
    for addr, want, code in (('"nonsense"', "engine.prometheus: 'nonsense' is not PORT", 2),
                             ('"127.0.0.1:70000"', "is not PORT", 2),
                             ("70000", "is not PORT", 2),
                             ('"[::1:9100"', "is not PORT", 2),
                             ("%d" % taken, "engine.prometheus: cannot listen on", 1)):
        path = os.path.join(tmp, "bad.yaml")
        with open(path, "w") as f:
            f.write(YAML % (addr, CHUNK, CHUNK, RATE, free_port(socket.SOCK_DGRAM), CHUNK))
        r = subprocess.run([CBF_RUN, path], capture_output=True, text=True, timeout=60)
        said = [ln for ln in r.stderr.splitlines() if "engine.prometheus" in ln]
        check(r.returncode == code and said and want in said[0] and re.search(r"bad\.yaml:%d:\d+: " % line, said[0]),
              "prometheus: %s refused at its line, exit %d (%s)" % (addr, r.returncode, said))


def metrics_url(e):
    deadline = time.monotonic() + 30
    while True:
        m = re.search(r"metrics: Prometheus on (\S+)", "".join(e.log))
        if m:
            return m.group(1)
        if time.monotonic() > deadline or not e.running():
            fail("no metrics address in the log:\n" + "".join(e.log))
        time.sleep(0.05)


def ipv6_loopback(tmp):
    """An address written out ([::1]:0: IPv6, a port the system picks)."""
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_STREAM) as s:
            s.bind(("::1", 0))
    except OSError:
        print("ok: no IPv6 loopback here: [::1] not tried")
        return
    e = Engine(YAML % ('"[::1]:0"', CHUNK, CHUNK, RATE, free_port(socket.SOCK_DGRAM), CHUNK),
               os.path.join(tmp, "v6.yaml"))
    try:
        url = metrics_url(e)
        port = int(url.rsplit(":", 1)[1].split("/")[0])
        check(url.startswith("http://[::1]:") and port > 0, "[::1]:0 served on %s" % url)
        check(listening(port) == [("tcp6", "00000000000000000000000001000000")],
              "listening on ::1 only %s" % listening(port))
        parse(scrape(url))
        check(e.shutdown() == 0, "exit 0 after shutdown")
    finally:
        e.kill()


def end_table(path):
    """{node: {column or counter: value, "gauges": {gauge: value}}} from cbf-run's
    table at exit (counters, then "|" and the gauges)."""
    rows = {}
    with open(path) as f:
        lines = f.read().splitlines()
    head = [i for i, ln in enumerate(lines) if ln.startswith("node ")]
    if not head:
        fail("no end-of-run table in cbf-run's output")
    for ln in lines[head[-1] + 1:]:
        f = ln.split()
        if len(f) < 7 or f[0] not in PLUGINS:
            continue
        row = {"buffers_in": int(f[2]), "buffers_out": int(f[3])}
        bar = f.index("|") if "|" in f else len(f)
        row.update({k: int(v) for k, v in (x.split("=") for x in f[7:bar])})
        row["gauges"] = {k: float(v) for k, v in (x.split("=") for x in f[bar + 1:])}
        rows[f[0]] = row
    return rows


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-prom-")
    port = free_port(socket.SOCK_STREAM)
    out_path = os.path.join(tmp, "stdout.txt")
    with open(out_path, "w") as out:
        e = Engine(YAML % (port, CHUNK, CHUNK * CHUNKS, RATE, free_port(socket.SOCK_DGRAM), CHUNK),
                   os.path.join(tmp, "prom.yaml"), stdout=out)
    try:
        url = metrics_url(e)
        check(url == "http://127.0.0.1:%d/metrics" % port, "bare port: served on %s" % url)
        found = listening(port)
        check(found == [("tcp", "0100007F")], "bare port: listening on 127.0.0.1 only %s" % found)

        text = scrape(url)
        s1, types = parse(text)
        check_format(text, s1, types)
        # The second scrape once dsim has sent more: counters grow, none falls.
        samples = value(s1, "cbf_samples_total", "dsim")
        deadline = time.monotonic() + 20
        while True:
            s2, _ = parse(scrape(url))
            if value(s2, "cbf_samples_total", "dsim") > samples or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        c1, c2 = counters_of(s1), counters_of(s2)
        check(set(c1) == set(c2), "the same counters in both scrapes")
        check(all(c2[k] >= c1[k] for k in c1), "no counter fell between scrapes")
        grew = sorted(k[0] + "{" + dict(k[1])["node"] + "}" for k in c1 if c2[k] > c1[k])
        check(value(s2, "cbf_samples_total", "dsim") > samples
              and value(s2, "cbf_node_buffers_in_total", "sink") >= value(s1, "cbf_node_buffers_in_total", "sink"),
              "counters grew while dsim ran (%d of them)" % len(grew))

        bad_requests(e, port, url)
        start_errors(tmp, port)
        ipv6_loopback(tmp)

        # The finite branch ends (dsim sent its last chunk and two scrapes
        # 0.5 s apart, 12 chunk periods, agree); then it must match the table.
        deadline = time.monotonic() + 60
        prev = None
        while True:
            s3, _ = parse(scrape(url))
            now = {k: v for k, v in counters_of(s3).items()
                   if dict(k[1])["node"] in FINITE and "seconds" not in k[0]}
            if (value(s3, "cbf_node_buffers_out_total", "dsim") == CHUNKS and now == prev) \
                    or time.monotonic() > deadline:
                break
            prev = now
            time.sleep(0.5)
        check(value(s3, "cbf_node_buffers_out_total", "dsim") == CHUNKS,
              "dsim sent its %d chunks" % CHUNKS)
        check(value(s3, "cbf_output_clipped_samples_total", "post", pol="0") > 0,
              "gain 50 saturates: output_clipped_samples{pol=0} > 0")
        check(e.shutdown() == 0, "exit 0 after shutdown")
    finally:
        e.kill()
    table = end_table(out_path)
    for node in FINITE:
        row = table[node]
        for col, name in (("buffers_in", "cbf_node_buffers_in_total"),
                          ("buffers_out", "cbf_node_buffers_out_total")):
            check(value(s3, name, node) == row[col],
                  "%s %s: scraped %s, end of run %d" % (node, col, value(s3, name, node), row[col]))
        config = config_of(s3, node)
        for gauge, v in row["gauges"].items():
            got = config[gauge] if gauge in config else value(s3, "cbf_" + re.sub(r"[.-]", "_", gauge), node)
            check(got is not None and math.isclose(got, v, rel_tol=1e-5, abs_tol=1e-9),
                  "%s gauge %s: scraped %s, end of run %g" % (node, gauge, got, v))
        for counter, v in row.items():
            if counter in ("buffers_in", "buffers_out", "gauges"):
                continue
            name, extra = "cbf_%s_total" % counter, {}
            if counter in TIMESTAMPS:   # counters in the node, gauges in Prometheus
                name = "cbf_" + re.sub(r"[.-]", "_", counter)
            if node == "post" and counter.startswith("saturated_pol"):
                name, extra = "cbf_output_clipped_samples_total", {"pol": counter[-1]}
            check(value(s3, name, node, **extra) == v,
                  "%s %s: scraped %s, end of run %d" % (node, counter, value(s3, name, node, **extra), v))


if __name__ == "__main__":
    main()
