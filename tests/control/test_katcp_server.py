"""libcbf's katcp server for programs that are not an engine (cbf/katcp.h),
with aiokatcp as the peer: katcp_serve runs katcp_demo.h's two servers in
one process (A: a sensor table and slow requests; B: a snapshot sensor and
?ask, which calls A with libcbf's C katcp client).

- aiokatcp's SensorWatcher lists and samples every sensor of A (each katcp
  type parsed as aiokatcp parses it, discrete values included), and picks
  up a sensor added later through #interface-changed;
- demo.counter sampled on `event` while A's own thread sets it 1..N: every
  value arrives, in order;
- a slow request on two clients at once (?meet 2 is answered only once both
  run together) sees both answered;
- B's ?ask: the C client calling A, its reply and informs passed back.
Every wait is bounded; nothing passes by timing."""
import asyncio
import enum
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import check, fail  # noqa: E402

try:
    import aiokatcp
except ImportError:
    print("SKIP: aiokatcp is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

N = 300
WAIT = 20   # seconds: a safety net only


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


def serve(exe):
    """katcp_serve, and its servers' addresses by name."""
    p = subprocess.Popen([exe], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    addrs = {}
    for _ in range(2):
        line = p.stdout.readline()
        if not line:
            fail("katcp_serve printed no address (exit %s)" % p.poll())
        name, addr = line.split()
        host, port = addr.rsplit(":", 1)
        addrs[name] = (host, int(port))
    return p, addrs


async def watched(a_addr):
    client = await aiokatcp.Client.connect(*a_addr)
    watcher = aiokatcp.SensorWatcher(client)
    client.add_sensor_watcher(watcher)
    await asyncio.wait_for(watcher.synced.wait(), WAIT)
    s = watcher.sensors
    want = {"demo.counter": int, "demo.level": float, "demo.flag": bool, "demo.where": aiokatcp.Address,
            "demo.when": aiokatcp.Timestamp, "demo.note": bytes}
    for name, typ in want.items():
        check(name in s and s[name].stype is typ, "SensorWatcher: %s is %s" % (name, typ.__name__))
    check("demo.state" in s and issubclass(s["demo.state"].stype, enum.Enum) and
          [m.value for m in s["demo.state"].stype] == [b"idle", b"busy"],
          "SensorWatcher: demo.state is discrete idle|busy")
    check(s["demo.level"].units == "dB", "SensorWatcher: demo.level in dB")
    # A sensor added later: the server says #interface-changed, the watcher re-lists.
    watcher.synced.clear()
    await client.request("add", "demo.later")
    for _ in range(100):
        await asyncio.wait_for(watcher.synced.wait(), WAIT)
        if "demo.later" in watcher.sensors:
            break
        watcher.synced.clear()
    check("demo.later" in watcher.sensors, "SensorWatcher: a sensor added later is picked up (#interface-changed)")
    await client.request("drop", "demo.later")
    client.close()
    await client.wait_closed()


async def event_sampling(a_addr):
    client = await aiokatcp.Client.connect(*a_addr)
    got = []
    done = asyncio.Event()

    def on_status(timestamp, count, name, status, value):
        got.append(int(text(value)))
        if got[-1] == N:
            done.set()

    client.add_inform_callback("sensor-status", on_status)
    reply, _ = await client.request("sensor-sampling", "demo.counter", "event")
    check([text(a) for a in reply] == ["demo.counter", "event"], "?sensor-sampling demo.counter event")
    start = len(got)   # the value now
    await client.request("count", str(N))
    await asyncio.wait_for(done.wait(), WAIT)
    seen = got[start:]
    check(seen == list(range(1, N + 1)),
          "event sampling while another thread sets the sensor: all %d changes, in order" % N)
    client.close()
    await client.wait_closed()
    return N


async def slow_at_once(a_addr):
    c1 = await aiokatcp.Client.connect(*a_addr)
    c2 = await aiokatcp.Client.connect(*a_addr)
    r = await asyncio.wait_for(asyncio.gather(c1.request("meet", "2"), c2.request("meet", "2")), WAIT + 10)
    check([text(x[0][0]) for x in r] == ["2", "2"], "?meet 2 on two clients at once: both answered")
    for c in (c1, c2):
        c.close()
        await c.wait_closed()


async def fan_out(b_addr, count):
    client = await aiokatcp.Client.connect(*b_addr)
    reply, informs = await client.request("ask", "sensor-value", "demo.counter")
    check(len(informs) == 1 and text(informs[0].arguments[2]) == "demo.counter" and
          text(informs[0].arguments[4]) == str(count),
          "B's ?ask sensor-value: the C client's answer from A (%s)" % [text(a) for a in informs[0].arguments])
    try:
        await client.request("ask", "meet", "x")
        fail("?ask meet x was accepted")
    except aiokatcp.FailReply as exc:
        check("whole number" in str(exc), "B's ?ask passes A's fail on (%s)" % exc)
    client.close()
    await client.wait_closed()


async def main(addrs):
    await watched(addrs["A"])
    count = await event_sampling(addrs["A"])
    await slow_at_once(addrs["A"])
    await fan_out(addrs["B"], count)


def run():
    if len(sys.argv) != 2:
        fail("usage: test_katcp_server.py KATCP_SERVE")
    p, addrs = serve(sys.argv[1])
    try:
        asyncio.run(main(addrs))
    finally:
        p.stdin.close()
        rc = p.wait(timeout=WAIT)
    check(rc == 0, "katcp_serve closed both servers and exited 0")


if __name__ == "__main__":
    run()
