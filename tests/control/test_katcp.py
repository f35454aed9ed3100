"""katcp v5 through a real cbf-run (engine key `katcp:`), with aiokatcp as
the client (as MeerKAT's CAM and katsdpcontroller are) and raw sockets for
what no well-behaved client sends:

- ?help, ?watchdog, ?log-level (set and read back), ?sensor-list (types and
  units), ?sensor-value (counts increase), ?sensor-sampling period (informs
  arrive at the period) and none (they stop);
- plugin requests through the shared request path: dsim's `signals` in the
  generic key=value form, read back through the sensor it moves; fft_post's
  `gain` generic and positional (katgpucbf's ?gain stream input value),
  filesink's capture-stop/-start; bad arguments are `fail` with the very text
  the ZeroMQ plane gives (one implementation), unknown requests `invalid`;
- escapes both ways, message ids echoed;
- garbage bytes, an unterminated line over the 8 MiB cap (#disconnect, the
  connection closed), a client that disconnects mid-reply: the engine stays
  up and answers the next client;
- loopback unless an address is given (a warning beyond it), a malformed
  address refused at its YAML line; ?halt drains and exits 0."""
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import CBF_RUN, Engine, check, fail  # noqa: E402
import test_control  # noqa: E402

try:
    import aiokatcp
except ImportError:
    print("SKIP: aiokatcp is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

MAX_LINE = 8 << 20
CHANNELS = 256   # test_control's pfb

# test_control's F-engine, with katcp in place of the sensor publisher.
YAML = test_control.YAML.replace("sensors: tcp://127.0.0.1:*\n  sensor_period: %g", "katcp: %s")


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


async def value(client, name):
    _, informs = await client.request("sensor-value", name)
    check(len(informs) == 1 and text(informs[0].arguments[2]) == name,
          "?sensor-value %s: one #sensor-value inform" % name)
    a = informs[0].arguments
    return float(a[0]), text(a[3]), text(a[4])


async def expect(client, cls, want, *args):
    try:
        await client.request(*args)
    except cls as exc:
        check(want in str(exc), "?%s: %s '%s'" % (" ".join(map(str, args)), cls.__name__, exc))
        return str(exc)
    fail("?%s was accepted; expected %s" % (" ".join(map(str, args)), cls.__name__))


async def gains_in_force(client, inp, want):
    """?gain post INPUT, until it reads want (a change takes effect with
    the next buffer), 10 s at most; the last reading."""
    deadline = time.monotonic() + 10
    while True:
        reply, _ = await client.request("gain", "post", inp)
        got = [text(a) for a in reply]
        if got == want or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.02)


async def session(e):
    host, port = e.katcp
    client = await aiokatcp.Client.connect(host, port)
    try:
        # help: the built-ins and every plugin request, each once per node.
        _, informs = await client.request("help")
        names = [text(m.arguments[0]) for m in informs]
        for want in ("help", "watchdog", "halt", "log-level", "sensor-list", "sensor-value",
                     "sensor-sampling", "signals", "delays", "gain", "capture"):
            check(want in names, "?help lists %s" % want)
        _, informs = await client.request("help", "gain")
        check(len(informs) == 1 and "node=post" in text(informs[0].arguments[1]),
              "?help gain: one inform naming its node")
        await expect(client, aiokatcp.FailReply, "unknown request", "help", "no-such")

        reply, _ = await client.request("watchdog")
        check(reply == [], "?watchdog ok")

        reply, _ = await client.request("log-level", "debug")
        check(reply == [b"debug"], "?log-level debug sets it")
        reply, _ = await client.request("log-level")
        check(reply == [b"debug"], "?log-level reads it back")
        await client.request("log-level", "info")
        await expect(client, aiokatcp.FailReply, "unknown level", "log-level", "loud")

        # sensor-list: every node's runtime counts, queues and counters.
        reply, informs = await client.request("sensor-list")
        sensors = {text(m.arguments[0]): [text(a) for a in m.arguments[1:]] for m in informs}
        check(int(reply[0]) == len(informs) == len(sensors) > 20,
              "?sensor-list: %d sensors, the count in the reply" % len(sensors))
        for name, typ in (("post.buffers-in", "integer"), ("post.busy-s", "float"),
                          ("dsim.signal-changes", "integer"), ("post.in.queue-fill", "integer"),
                          ("sink.in0.queue-fill", "integer"), ("sink.buffers-dropped", "integer")):
            check(name in sensors and sensors[name][2] == typ,
                  "%s listed as %s (%s)" % (name, typ, sensors.get(name)))
        check(sensors["post.busy-s"][1] == "s", "post.busy-s in seconds")
        check(sensors["pfb.rms-dbfs-pol0"][1] == "dBFS", "pfb.rms-dbfs-pol0 in dBFS (%s)" % sensors["pfb.rms-dbfs-pol0"])
        # NODE as the YAML names it, then the sensor's name: no queue named
        # twice, no brackets turned into hyphens.
        # katgpucbf's engine-level names aside (test_katcp_names.py)
        engine_level = (r"device-status|steady-state-timestamp|time\.[a-z]+|input[01]\.dig-rms-dbfs|"
                        r"max-period|sample-bits|dither-seed|signals|signals-orig|period")   # the dsim's
        check(all(re.fullmatch(engine_level, n) or re.fullmatch(r"(dsim|pfb|post|sink)\.[a-z0-9][a-z0-9.-]*", n)
                  for n in sensors) and not any("queue." in n or "-." in n for n in sensors),
              "sensor names are NODE.NAME, NAME in letters, digits, dots and hyphens")
        check(sensors["post.buffers-in"][0] == "buffers this node has taken from its inputs" and
              sensors["sink.in0.queue-fill"][0] == "buffers waiting in the queue of input in0" and
              sensors["pfb.rms-dbfs-pol0"][0].startswith("digitiser power"),
              "descriptions in words (%s; %s)" % (sensors["post.buffers-in"][0], sensors["pfb.rms-dbfs-pol0"][0]))
        check(not any(re.search(r"of node \S+ \(plugin", d[0]) for d in sensors.values()),
              "no description is the machine's 'X of node N (plugin P)'")
        _, informs = await client.request("sensor-list", "/^post\\./")
        check(informs and all(text(m.arguments[0]).startswith("post.") for m in informs),
              "?sensor-list /regex/ picks by name")
        # docs/control.md's nc example: a regex's backslash travels as katcp's \\.
        got = raw(e.katcp, b"?sensor-value /^post\\\\.buffers/\n")
        check(b"#sensor-value" in got and b"post.buffers-in" in got and b"!sensor-value ok 2" in got,
              "?sensor-value /^post\\\\.buffers/ over a raw socket: two sensors")
        got = raw(e.katcp, b"?sensor-value /^post\\.buffers/\n")
        check(b"!sensor-value invalid" in got and b"\\\\" in got,
              "a bare \\. is not a katcp escape, and the reply says how to send a backslash (%s)" % got[-160:])
        await expect(client, aiokatcp.FailReply, "back-references", "sensor-list", "/(a)\\1/")
        await expect(client, aiokatcp.FailReply, "longer than", "sensor-list", "/" + "a" * 300 + "/")
        await expect(client, aiokatcp.FailReply, "unknown sensor", "sensor-list", "no.such")
        await expect(client, aiokatcp.FailReply, "regular expression", "sensor-list", "/(/")

        # sensor-value: counts go up while the pipeline runs.
        t0, st0, v0 = await value(client, "post.buffers-in")
        await asyncio.sleep(0.5)
        t1, st1, v1 = await value(client, "post.buffers-in")
        check(st0 == st1 == "nominal" and int(v1) > int(v0) and t1 > t0,
              "post.buffers-in %s -> %s, nominal" % (v0, v1))
        # An argument with a space: escaped by the client, unescaped here,
        # escaped again in the error message, unescaped by the client.
        await expect(client, aiokatcp.FailReply, "unknown sensor 'a b\\c'", "sensor-value", "a b\\c")

        # sensor-sampling period: informs at the period, then none.
        got = []

        def on_status(timestamp: float, count: int, name: str, status: str, value: str):
            got.append((time.monotonic(), timestamp, name, status, value))

        client.add_inform_callback("sensor-status", on_status)
        reply, _ = await client.request("sensor-sampling", "post.buffers-in", "period", "0.2")
        check([text(a) for a in reply] == ["post.buffers-in", "period", "0.2"],
              "?sensor-sampling period 0.2 acknowledged (%s)" % reply)
        deadline = time.monotonic() + 10
        while len(got) < 6 and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        check(len(got) >= 6, "#sensor-status informs arrive (%d)" % len(got))
        stamps = [g[1] for g in got[1:6]]
        gaps = [b - a for a, b in zip(stamps, stamps[1:])]
        # The thread wakes for each period; 2 cores shared with other tests
        # can delay a wake-up, so each gap is held loosely.
        check(all(0.1 < g < 0.6 for g in gaps), "informs about 0.2 s apart (%s)" % gaps)
        vals = [int(g[4]) for g in got]
        check(vals == sorted(vals) and vals[-1] > vals[0], "sampled values increase (%s)" % vals)
        reply, _ = await client.request("sensor-sampling", "post.buffers-in")
        check([text(a) for a in reply][:2] == ["post.buffers-in", "period"], "?sensor-sampling reads the strategy")
        await client.request("sensor-sampling", "post.buffers-in", "none")
        await asyncio.sleep(0.3)
        n = len(got)
        await asyncio.sleep(0.6)
        check(len(got) == n, "no informs after strategy none")
        await expect(client, aiokatcp.FailReply, "not supported", "sensor-sampling", "post.buffers-in",
                     "differential", "1")
        await expect(client, aiokatcp.FailReply, "period", "sensor-sampling", "post.buffers-in", "period",
                     "0")
        await expect(client, aiokatcp.FailReply, "unknown sensor", "sensor-sampling", "nope", "auto")
        # auto: the value now, then on change.
        got.clear()
        await client.request("sensor-sampling", "dsim.signal-changes", "auto")
        deadline = time.monotonic() + 5
        while not got and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        check(got and got[0][2] == "dsim.signal-changes" and got[0][4] == "0",
              "auto sends the value at once (%s)" % got[:1])

        # A plugin request in the generic form changes the signal; the
        # counter it moves is read back (and arrives by auto sampling).
        reply, _ = await client.request("signals", "node=dsim", "noise=0.2")
        fields = dict(text(a).split("=", 1) for a in reply)
        check(fields.get("node") == "dsim", "?signals node=dsim noise=0.2 ok (%s)" % fields)
        deadline = time.monotonic() + 10
        while not any(g[4] == "1" for g in got) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        check(any(g[4] == "1" for g in got), "dsim.signal-changes went to 1 (auto: %s)" % got)
        _, _, v = await value(client, "dsim.signal-changes")
        check(v == "1", "?sensor-value dsim.signal-changes reads 1")
        await client.request("sensor-sampling", "dsim.signal-changes", "none")

        # gain, generic and katgpucbf's positional form.
        reply, _ = await client.request("gain", "node=post", "values=[0.5,0.25]", "pol=0")
        fields = dict(text(a).split("=", 1) for a in reply)
        check(fields.get("node") == "post" and int(fields.get("at", -1)) > 0,
              "?gain node=post values=[0.5,0.25] pol=0: ok from a timestamp (%s)" % fields)
        reply, _ = await client.request("gain", "post", "1", "0.5-2j")
        check(reply == [], "?gain post 1 0.5-2j: ok, nothing more (as katgpucbf) (%s)" % reply)
        reply, _ = await client.request("gain-all", "post", "0.75")
        check(reply == [], "?gain-all post 0.75: ok alone, as katgpucbf's and as ?gain's (%s)" % reply)
        # A gain per channel on input 0; read back once in force, each value
        # as katgpucbf writes it (format_complex: f"{z:.17g}" of the complex64).
        rng = np.random.default_rng()
        vals = (rng.normal(size=CHANNELS) + 1j * rng.normal(size=CHANNELS)) * 10.0 ** rng.integers(-6, 6, CHANNELS)
        reply, _ = await client.request("gain", "post", "0", *[f"{v.real!r}{v.imag:+}j" for v in vals.tolist()])
        check(reply == [], "?gain post 0 with %d values: ok" % CHANNELS)
        want = [f"{v:.17g}" for v in vals.astype(np.complex64).tolist()]
        got = await gains_in_force(client, "0", want)
        check(got == want, "?gain post 0 reads the %d gains back as katgpucbf writes them (%s ...)"
              % (CHANNELS, got[:2]))
        check([complex(v) for v in got] == vals.astype(np.complex64).tolist(),
              "and each reads back as the float32 the engine holds")
        check(await gains_in_force(client, "1", ["0.75+0j"]) == ["0.75+0j"],
              "?gain post 1: one value for every channel (gain-all's)")
        # default: the YAML's gains (0.1) on both inputs.
        reply, _ = await client.request("gain-all", "post", "default")
        check(reply == [], "?gain-all post default: ok alone (%s)" % reply)
        want = ["0.10000000149011612+0j"]
        check(await gains_in_force(client, "0", want) == want and
              await gains_in_force(client, "1", want) == want,
              "?gain-all default restores the configured gain on both inputs")
        rc, rep, _ = e.request({"request": "gain", "node": "post", "pol": 1})
        check(rc == 0 and rep["pol1"] == [np.float32(0.1), 0.0] and "pol0" not in rep,
              "the same reading over ZeroMQ: pol1 [re, im] (%s)" % rep)
        await expect(client, aiokatcp.FailReply, "0 or 1", "gain", "post", "2")
        await expect(client, aiokatcp.FailReply, "not a finite", "gain", "post", "0", "1+nanj")
        await expect(client, aiokatcp.FailReply, "not a finite", "gain", "post", "0", "abc")

        # Bad arguments: fail, with the text the ZeroMQ plane gives.
        # JSON writes 1e10 so; the same text over katcp, for the same message.
        msg = await expect(client, aiokatcp.FailReply, "values", "gain", "node=post", "values=[10000000000.0]")
        rc, rep, _ = e.request({"request": "gain", "node": "post", "values": [1e10]})
        check(rc != 0 or (rep and not rep.get("ok")), "the same bad gain refused over ZeroMQ")
        rc2, out, err = e.ctl("--json", "raw", '{"request": "gain", "node": "post", "values": [1e10]}')
        check(msg in out + err, "one implementation: the katcp and ZeroMQ errors read the same (%r; %r)" % (msg, out + err))
        await expect(client, aiokatcp.FailReply, "bogus", "gain", "node=post", "values=[1]", "bogus=1")
        await expect(client, aiokatcp.FailReply, "expected key=value", "signals", "node=dsim", "noise")
        await expect(client, aiokatcp.FailReply, "no node 'nope'", "gain", "node=nope", "values=[1]")
        await expect(client, aiokatcp.FailReply, "takes 0 to 0", "watchdog", "extra")
        # Unknown requests: invalid.
        await expect(client, aiokatcp.InvalidReply, "unknown request 'no-such-request'", "no-such-request")
        await expect(client, aiokatcp.InvalidReply, "has no request 'gain'", "gain", "node=dsim", "values=[1]")

        # capture-stop / capture-start on the file sink (katgpucbf's names).
        reply, _ = await client.request("capture-stop", "sink")
        check(reply == [], "?capture-stop sink: ok alone, as katgpucbf's (%s)" % reply)
        reply, _ = await client.request("capture-start", "sink")
        check(reply == [], "?capture-start sink: ok alone (%s)" % reply)
        await expect(client, aiokatcp.FailReply, "has no request 'capture'", "capture-start", "post")
        await expect(client, aiokatcp.InvalidReply, "unknown request 'gian' (did you mean 'gain'?)", "gian")
        await expect(client, aiokatcp.FailReply, "one argument", "capture-stop")
        # katsdpcontroller's `?capture-start STREAM TIMESTAMP` hands the
        # timestamp on as the request's `from`, which the file sink lacks
        # (the sender has it: control_sender_capture).
        await expect(client, aiokatcp.FailReply, "from", "capture-start", "sink", "123")
    finally:
        client.close()
        await client.wait_closed()


def raw(addr, data, timeout=10, shut=True):
    """Sends data on a fresh connection; returns all it got until EOF or a quiet second."""
    s = socket.create_connection(addr, timeout=timeout)
    try:
        s.sendall(data)
        if shut:
            s.shutdown(socket.SHUT_WR)
        s.settimeout(1.0)
        out = b""
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            out += d
        return out
    finally:
        s.close()


def misbehave(e):
    addr = e.katcp
    out = raw(addr, b"?watchdog[7]\n\x00\xff\xfe garbage\n?\n?help \\q\n?1x\n!bogus ok\n#inform x\n"
                    b"?sensor-value a\\_b\n\r\n?watchdog[8]\n")
    lines = out.decode(errors="replace").splitlines()
    check(lines[:2] == ["#version-connect katcp-protocol 5.0-MI", "#version-connect katcp-library cbf-katcp-1.0"]
          and lines[2].startswith("#version-connect katcp-device cbf-engine ") and len(lines[2].split()) == 4,
          "#version-connect informs on connect, katcp-device with its build (katgpucbf's suite reads it)")
    check("!watchdog[7] ok" in lines and "!watchdog[8] ok" in lines, "message ids echoed around garbage")
    check(any(ln.startswith("!help invalid") and "bad\\_escape" in ln for ln in lines),
          "a bad escape: !help invalid")
    check(sum(ln.startswith("#log warn") for ln in lines) >= 2, "unparsable lines: #log warn informs")
    check("!sensor-value fail unknown\\_sensor\\_'a\\_b'" in lines, "escapes read and written back")
    check(not any(ln.startswith("!bogus") for ln in lines), "a reply from a client is ignored")

    # An unterminated line over the cap: #disconnect, and the connection closes.
    s = socket.create_connection(addr, timeout=20)
    try:
        chunk = b"?help " + b"x" * (1 << 20)
        sent = 0
        try:
            while sent < MAX_LINE + (2 << 20):
                s.sendall(chunk)
                sent += len(chunk)
        except (BrokenPipeError, ConnectionResetError):
            pass
        got = b""
        s.settimeout(10)
        try:
            while True:
                d = s.recv(65536)
                if not d:
                    break
                got += d
        except (ConnectionResetError, socket.timeout):
            pass
    finally:
        s.close()
    check(b"#disconnect line\\_longer\\_than\\_8388608\\_bytes" in got,
          "an over-long line: #disconnect, after %d bytes sent" % sent)

    # Many requests, then gone without reading: replies meet a closed socket.
    for _ in range(5):
        s = socket.create_connection(addr, timeout=10)
        s.sendall(b"?sensor-list\n?help\n" * 300)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        s.close()   # a reset, mid-reply
    # Many clients at once, beyond the 64 served together: each newcomer is
    # greeted, and the client idle longest makes room, told why.
    socks = []
    for _ in range(70):
        s = socket.create_connection(addr, timeout=10)
        got = b""
        while b"katcp-device" not in got:
            d = s.recv(4096)
            if not d:
                break
            got += d
        if b"#version-connect katcp-device" not in got:
            fail("client %d of 70 at once is not greeted (%s)" % (len(socks) + 1, got))
        socks.append(s)
    told = 0
    for s in socks[:10]:
        s.settimeout(10)
        got = b""
        try:
            while b"\n" not in got:
                d = s.recv(4096)
                if not d:
                    break
                got += d
        except socket.timeout:
            pass
        told += b"#disconnect" in got and b"idle\\_longest" in got
    for s in socks:
        s.close()
    check(told >= 1, "70 clients at once: each greeted, and %d of the first 10 told they made room" % told)
    check(e.running(), "the engine is still running")
    out = raw(addr, b"?watchdog\n")
    check(b"!watchdog ok" in out, "and answers the next client")


def bind_checks(tmp):
    # Beyond loopback: a loud warning naming engine.katcp.
    e = Engine(YAML % ('"0.0.0.0:0"', os.path.join(tmp, "w.h5")), os.path.join(tmp, "wide.yaml"))
    try:
        check(e.katcp[0] == "0.0.0.0", "katcp: 0.0.0.0:0 binds the wildcard address")
        check(any("engine.katcp listens on 0.0.0.0" in ln and "beyond this host's loopback" in ln
                  for ln in e.log), "and says so loudly")
    finally:
        e.kill()
    # A bare port: loopback.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    e = Engine(YAML % (port, os.path.join(tmp, "p.h5")), os.path.join(tmp, "port.yaml"))
    try:
        check(e.katcp == ("127.0.0.1", port), "katcp: PORT listens on 127.0.0.1:PORT")
        check(not any("beyond this host's loopback" in ln for ln in e.log), "with no warning")
    finally:
        e.kill()
    # A node name with '_': its sensors and its requests spell it alike.
    under = (YAML % ("0", os.path.join(tmp, "u.h5"))).replace("  post:", "  fft_post:")
    under = under.replace("-> post.in", "-> fft_post.in").replace("- post.out", "- fft_post.out")
    e = Engine(under, os.path.join(tmp, "under.yaml"))
    try:
        out = raw(e.katcp, b"?sensor-list /^fft_post\\\\./\n?gain fft_post 0\n")
        check(b"#sensor-list fft_post.buffers-in" in out and b"fft-post" not in out and b"!gain ok" in out,
              "node fft_post: sensors fft_post.NAME, and ?gain fft_post answers")
    finally:
        e.kill()
    path = os.path.join(tmp, "bad.yaml")
    with open(path, "w") as f:
        f.write(YAML % ('"nonsense"', os.path.join(tmp, "b.h5")))
    r = subprocess.run([CBF_RUN, path], capture_output=True, text=True, timeout=60)
    check(r.returncode == 2 and re.search(r"bad\.yaml:5:\d+: engine\.katcp: 'nonsense' is not PORT", r.stderr),
          "a malformed address is refused at its line (exit %d)" % r.returncode)


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-katcp-")
    e = Engine(YAML % ("127.0.0.1:0", os.path.join(tmp, "out.h5")), os.path.join(tmp, "engine.yaml"))
    try:
        check(e.katcp[0] == "127.0.0.1" and e.katcp[1] > 0, "katcp on %s:%d" % e.katcp)
        asyncio.run(asyncio.wait_for(session(e), 120))
        misbehave(e)
        # Still a whole engine: a last aiokatcp client halts it.

        async def halt():
            client = await aiokatcp.Client.connect(*e.katcp)
            await client.request("halt")
            client.close()
            await client.wait_closed()

        asyncio.run(asyncio.wait_for(halt(), 30))
        code = e.proc.wait(timeout=60)
        check(code == 0, "?halt drains the engine and it exits 0")
    finally:
        e.kill()
    bind_checks(tmp)
    print("PASS")


if __name__ == "__main__":
    main()
