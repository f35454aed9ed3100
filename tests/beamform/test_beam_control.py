"""The beamformer's requests and sensors through a real cbf-run, with
aiokatcp as the client (as katgpucbf's CAM drives an XB-engine):

- katgpucbf's positional forms ?beam-weights stream w..., ?beam-delays
  stream delay:phase..., ?beam-quant-gains stream gain (stream = the beam's
  name from `names`, or NODE/BEAM), and the generic key=value form with
  `at`;
- the per-beam text sensors NODE.BEAM.weight, .delay, .quantiser-gain and
  .beng-clip-cnt show the values in force in katgpucbf's text: a change
  shows once the data reaches its timestamp, and a far-future one stays
  pending while the sensor keeps the value in force;
- refusals (wrong count, NaN, malformed delay:phase, unknown beam, a past
  timestamp, one before a pending change) fail with the plugin's reason and
  change no sensor;
- a huge quantisation gain makes the beam's clip count rise with status
  `warn`.

The exact timing against the float64 reference is test_beam_control.c's.
usage: test_beam_control.py (CBF_BUILD_ROOT in the environment)"""
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "control"))
from ctl_util import Engine, check, fail  # noqa: E402

try:
    import aiokatcp
except ImportError:
    print("SKIP: aiokatcp is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

YAML = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
nodes:
  fsim:
    plugin: fsim
    params: {antennas: 4, channels: 16, spectra_per_heap: 32, batches: 2, length: 0}
  beam:
    plugin: beamformer
    params:
      beams: [{pol: 0}, {pol: 1, quant_gain: 0.5}]
      names: "tied-array-channelised-voltage.0x, tied-array-channelised-voltage.0y"
      weights: [1, 1, 0.5, 0.25]
  sink: {plugin: discard}
edges:
  - fsim.out -> beam.in
  - beam.out -> sink.in
"""

X = "tied-array-channelised-voltage.0x"
Y = "tied-array-channelised-voltage.0y"


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


async def sensor(client, name):
    _, informs = await client.request("sensor-value", name)
    if len(informs) != 1:
        fail("?sensor-value %s: %d informs" % (name, len(informs)))
    a = informs[0].arguments
    return text(a[3]), text(a[4])


async def wait_sensor(client, name, want, timeout=20):
    deadline = time.monotonic() + timeout
    while True:
        st, v = await sensor(client, name)
        if want(v, st):
            return st, v
        if time.monotonic() > deadline:
            fail("%s stayed %s %r" % (name, st, v))
        await asyncio.sleep(0.05)


async def refused(client, want, *args):
    try:
        await client.request(*args)
    except aiokatcp.FailReply as exc:
        check(want in str(exc), "?%s fails: %s" % (" ".join(map(str, args)), exc))
        return
    fail("?%s was accepted" % " ".join(map(str, args)))


def fields(reply):
    return dict(text(a).split("=", 1) for a in reply if "=" in text(a))


async def session(e):
    client = await aiokatcp.Client.connect(*e.katcp)
    w, d, g, c = ("beam.%s.%s" % (X, s) for s in ("weight", "delay", "quantiser-gain", "beng-clip-cnt"))
    dy, gy, cy = ("beam.%s.%s" % (Y, s) for s in ("delay", "quantiser-gain", "beng-clip-cnt"))
    # The YAML's values, in katgpucbf's text.
    check(await sensor(client, w) == ("nominal", "[1.0, 1.0, 0.5, 0.25]"), "%s: the YAML's weights" % w)
    check(await sensor(client, d) == ("nominal", "(0, " + ", ".join(["0.0"] * 8) + ")"),
          "%s: (loadmcnt, delay, phase, ...) of the YAML" % d)
    check(await sensor(client, gy) == ("nominal", "0.5"), "%s: 0.5" % gy)
    check((await sensor(client, c))[1].isdigit(), "%s: a count" % c)

    reply, _ = await client.request("beam-weights", X, "0.5", "2", "-1", "1e-3")
    f = fields(reply)
    check(f.get("beam") == X and int(f["at"]) >= 0 and f.get("node") == "beam",
          "?beam-weights stream w...: ok, %s" % f)
    await wait_sensor(client, w, lambda v, st: v == "[0.5, 2.0, -1.0, 0.001]")
    check(True, "%s shows the new weights once the data reaches them" % w)

    reply, _ = await client.request("beam-delays", Y, "1e-9:0.5", "0:0", "-2.5e-10:-1", "3e-9:3.25")
    at = int(fields(reply)["at"])
    want = "(%d, 1e-09, 0.5, 0.0, 0.0, -2.5e-10, -1.0, 3e-09, 3.25)" % at
    await wait_sensor(client, dy, lambda v, st: v == want)
    check(True, "?beam-delays stream delay:phase...: %s shows %s" % (dy, want))

    reply, _ = await client.request("beam-quant-gains", "beam/" + X, "0.125")
    await wait_sensor(client, g, lambda v, st: v == "0.125")
    check(True, "?beam-quant-gains NODE/BEAM gain: %s shows 0.125" % g)

    # A change far ahead is queued; the sensor keeps the values in force.
    later = at + (1 << 40)
    reply, _ = await client.request("beam-weights", "node=beam", "beam=" + X, "weights=[3,3,3,3]",
                                    "at=%d" % later)
    check(fields(reply).get("pending") == "1", "generic form with at far ahead: pending")
    await asyncio.sleep(0.5)
    check((await sensor(client, w))[1] == "[0.5, 2.0, -1.0, 0.001]",
          "%s still shows the weights in force while the change waits" % w)

    before = {n: await sensor(client, n) for n in (w, d, g, dy, gy)}
    await refused(client, "3 values", "beam-weights", Y, "1", "2", "3")
    await refused(client, "not a finite number", "beam-weights", Y, "1", "nan", "1", "1")
    await refused(client, "not delay:phase", "beam-delays", Y, "1e-9", "0:0", "0:0", "0:0")
    await refused(client, "no beam 'nosuch'", "beam-quant-gains", "nosuch", "1")
    await refused(client, "one value", "beam-quant-gains", X, "1", "2")
    await refused(client, "already been processed", "beam-quant-gains", "beam=" + X, "gain=2", "at=0")
    await refused(client, "give no weights", "beam-weights", "beam=" + X, "weights=[1,1,1,1]", "cancel=true")
    await refused(client, "out of range", "beam-weights", "beam=" + X, "weights=[1, .nan, 1, 1]")
    await asyncio.sleep(0.3)
    after = {n: await sensor(client, n) for n in before}
    check(after == before, "the refused requests changed no sensor")
    reply, _ = await client.request("beam-weights", "beam=" + X, "cancel=true")
    check(fields(reply).get("replaced") == "1" and fields(reply).get("pending") == "0",
          "cancel drops the far-ahead change (%s)" % fields(reply))

    # Clipping: a huge gain saturates beam 0y; its count rises and warns.
    await client.request("beam-quant-gains", Y, "1e6")
    st, v = await wait_sensor(client, cy, lambda v, st: int(v) > 0 and st == "warn")
    check(True, "%s rises to %s with status warn" % (cy, v))
    client.close()
    await client.wait_closed()


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-beamctl-")
    e = Engine(YAML, os.path.join(tmp, "engine.yaml"))
    try:
        asyncio.run(asyncio.wait_for(session(e), 120))
        check(e.shutdown() == 0, "the engine drains and exits 0")
    finally:
        e.kill()
    print("PASS")


if __name__ == "__main__":
    main()
