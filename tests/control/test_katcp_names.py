"""katgpucbf's sensor names, katcp types and value forms over a real cbf-run's
katcp port, with aiokatcp as the client (as CAM and katgpucbf's
qualification suite are), so an engine is a drop-in for katgpucbf's:

- an F-engine (dsim -> pfb -> fft_post) on the CPU: every name fgpu's
  engine has that cbf publishes (input0.dig-rms-dbfs, STREAM.input0.eq,
  STREAM.input0.delay, STREAM.input0.feng-clip-cnt, STREAM.dither-seed,
  steady-state-timestamp, time.*) with fgpu's katcp type; ?gain changes
  STREAM.input0.eq to format_complex's text once the change is in force,
  ?delays shows the model tuple after its load time and raises the
  engine-level steady-state-timestamp;
- an X/B engine (dsim -> 2 x pfb/fft_post -> gather -> correlator ->
  reducer, beamformer): STREAM.chan-range "(a,b)", STREAM.xeng-clip-cnt,
  the beams' BEAM.weight / .delay / .quantiser-gain / .beng-clip-cnt /
  .chan-range / .dither-seed at engine level; ?beam-weights changes
  BEAM.weight to xbgpu's str(list(weights)); an engine-level name that two
  nodes claim (input0.dig-rms-dbfs of pfb0 and pfb1) is published under
  each node instead.
The NODE.NAME sensors stay (pfb.rms-dbfs-pol0). Every wait is bounded."""
import asyncio
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(__file__))
from ctl_util import Engine, check, engine_yaml, fail, importable  # noqa: E402

(aiokatcp,) = importable("aiokatcp")

RATE, CHANNELS, SPH = 1000000, 256, 64
SYNC = 1700000000.0

FENG = engine_yaml(
    ["dsim: {plugin: dsim, params: {antennas: 1, samples_per_chunk: 65536, length: 0, noise: 0.05, "
     "realtime: true}}",
     "pfb: {plugin: pfb, params: {channels: %d, taps: 4, spectra_per_buffer: %d}}" % (CHANNELS, SPH),
     "post: {plugin: fft_post, params: {spectra_per_heap: %d, gain: [0.1, 0.0]}}" % SPH,
     "sink: {plugin: discard}"],
    ["dsim.out -> pfb.in", "pfb.out -> post.in", "post.out -> sink.in"],
    ["katcp: 127.0.0.1:0", "sync_time: %r" % SYNC, "adc_sample_rate: %d" % RATE])

XB = engine_yaml(
    ["dsim: {plugin: dsim, params: {antennas: 2, samples_per_chunk: 65536, length: 0, noise: 0.05}}",
     "pfb0: {plugin: pfb, params: {channels: %d, taps: 4, antenna: 0, spectra_per_buffer: %d}}" % (CHANNELS, SPH),
     "pfb1: {plugin: pfb, params: {channels: %d, taps: 4, antenna: 1, spectra_per_buffer: %d}}" % (CHANNELS, SPH),
     "post0: {plugin: fft_post, params: {spectra_per_heap: %d, gain: [0.04, 0.0]}}" % SPH,
     "post1: {plugin: fft_post, params: {spectra_per_heap: %d, gain: [0.04, 0.0]}}" % SPH,
     "gather: {plugin: gather}",
     "corr: {plugin: correlator, params: {heap_accumulation_threshold: 2}}",
     "reduce: {plugin: reducer}",
     "beams: {plugin: beamformer, params: {beams: [{pol: 0}, {pol: 1}], names: 'tied0, tied1'}}",
     "vis: {plugin: discard}", "bsink: {plugin: discard}"],
    ["dsim.out -> pfb0.in", "dsim.out -> pfb1.in", "pfb0.out -> post0.in", "pfb1.out -> post1.in",
     "post0.out -> gather.in", "post1.out -> gather.in", "gather.out -> corr.in", "gather.out -> beams.in",
     "corr.out -> reduce.in", "reduce.out -> vis.in", "beams.out -> bsink.in"],
    ["katcp: 127.0.0.1:0"])

# katgpucbf's name -> its katcp type (fgpu/engine.py, xbgpu/engine.py, utils.py)
FENG_WANT = {
    "input0.dig-rms-dbfs": "float", "input1.dig-rms-dbfs": "float",
    "post.input0.eq": "string", "post.input1.eq": "string",
    "pfb.input0.delay": "string", "pfb.input1.delay": "string",
    "post.input0.feng-clip-cnt": "integer", "post.input1.feng-clip-cnt": "integer",
    "post.dither-seed": "string",
    "steady-state-timestamp": "integer", "device-status": "discrete",
    "time.esterror": "float", "time.maxerror": "float", "time.state": "discrete", "time.synchronised": "boolean",
    # cbf's own names stay
    "pfb.rms-dbfs-pol0": "float", "post.saturated-pol0": "integer", "pfb.steady-state-timestamp": "integer",
}
XB_WANT = {
    "corr.chan-range": "string", "reduce.xeng-clip-cnt": "integer",
    "tied0.weight": "string", "tied0.delay": "string", "tied0.quantiser-gain": "float",
    "tied0.beng-clip-cnt": "integer", "tied0.chan-range": "string", "tied0.dither-seed": "string",
    "tied1.weight": "string",
    "pfb0.input0.dig-rms-dbfs": "float", "pfb1.input0.dig-rms-dbfs": "float",
    "steady-state-timestamp": "integer", "time.synchronised": "boolean",
}


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


async def listing(client):
    _, informs = await client.request("sensor-list")
    """{name: (type, [discrete values], units)}"""
    return {text(m.arguments[0]): (text(m.arguments[3]), [text(a) for a in m.arguments[4:]], text(m.arguments[2]))
            for m in informs}


async def value(client, name):
    _, informs = await client.request("sensor-value", name)
    a = informs[0].arguments
    return text(a[3]), text(a[4])


async def until(client, name, pred, what, limit=15):
    deadline = time.monotonic() + limit
    while True:
        st, v = await value(client, name)
        if pred(v):
            return v
        if time.monotonic() > deadline:
            fail(f"{what}: {name} still reads {v!r} ({st})")
        await asyncio.sleep(0.05)


def check_types(names, want):
    for n, t in want.items():
        check(n in names and names[n][0] == t, f"{n} is a {t} sensor ({names.get(n, ('absent',))[0]})")


async def feng(e):
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        names = await listing(client)
        check_types(names, FENG_WANT)
        check(names["time.state"][1] == ["ok", "ins", "del", "oop", "wait", "error"],
              "time.state takes aiokatcp's ClockState values")
        check(names["input0.dig-rms-dbfs"][2] == "dBFS", "input0.dig-rms-dbfs in dBFS")
        check(await value(client, "post.input0.eq") == ("nominal", "[0.10000000149011612+0j]"),
              "post.input0.eq: the YAML's gain, as fgpu writes a complex64 gain")
        check((await value(client, "post.dither-seed"))[1] == "1", "post.dither-seed: the dither key")
        st, v = await value(client, "time.synchronised")
        check(v in ("0", "1") and st in ("nominal", "error", "inactive"), f"time.synchronised {v} {st}")
        # ?gain in katgpucbf's form: the sensor follows once the change is in force
        await client.request("gain", "post", "0", "0.5-0.25j")
        await until(client, "post.input0.eq", lambda v: v == "[0.5-0.25j]", "?gain post 0 0.5-0.25j")
        check((await value(client, "post.input1.eq"))[1] == "[0.10000000149011612+0j]", "pol 1 unchanged")
        reply, _ = await client.request("gain", "post", "0")
        check([text(a) for a in reply] == ["0.5-0.25j"], "?gain post 0 reads format_complex's text")
        # ?delays: the tuple once the data reaches the load time
        check((await value(client, "pfb.input0.delay"))[1] == "(0, 0.0, 0.0, 0.0, 0.0)",
              "pfb.input0.delay at start: (0, 0.0, 0.0, 0.0, 0.0)")
        start = time.time() + 2.0   # ahead of the data, even on a loaded machine
        await client.request("delays", "pfb", "%.6f" % start, "1e-06,0:0.5,0", "2e-06,0:-0.5,1.5")
        load = round((start - SYNC) * RATE)
        _, ss = await value(client, "steady-state-timestamp")
        _, pss = await value(client, "pfb.steady-state-timestamp")
        check(int(ss) == int(pss) and abs(int(ss) - load) <= 1, f"steady-state-timestamp {ss} = pfb's, the load time")
        v = await until(client, "pfb.input0.delay", lambda v: not v.startswith("(0,"), "?delays")
        check(v == "(%s, 1e-06, 0.0, 0.5, 0.0)" % ss, f"pfb.input0.delay after the load time: {v}")
        v = (await value(client, "pfb.input1.delay"))[1]
        check(v == "(%s, 2e-06, 0.0, -0.5, 1.5)" % ss, f"pfb.input1.delay: {v}")
        st, v = await value(client, "input0.dig-rms-dbfs")
        check(st != "unknown" and float(v) < 0, f"input0.dig-rms-dbfs {v} ({st})")
    finally:
        client.close()
        await client.wait_closed()


async def xb(e):
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        names = await listing(client)
        check_types(names, XB_WANT)
        check("input0.dig-rms-dbfs" not in names, "claimed by two nodes: no engine-level input0.dig-rms-dbfs")
        check((await value(client, "corr.chan-range"))[1] == "(0,%d)" % (CHANNELS - 1),
              "corr.chan-range as xbgpu writes it")
        check((await value(client, "tied0.chan-range"))[1] == "(0,%d)" % (CHANNELS - 1), "tied0.chan-range")
        check((await value(client, "tied0.weight"))[1] == "[1.0, 1.0]", "tied0.weight at start")
        check((await value(client, "tied0.quantiser-gain"))[1] == "1.0", "tied0.quantiser-gain")
        await client.request("beam-weights", "tied0", "0.25", "0.5")
        await until(client, "tied0.weight", lambda v: v == "[0.25, 0.5]", "?beam-weights tied0 0.25 0.5")
        check((await value(client, "tied1.weight"))[1] == "[1.0, 1.0]", "tied1 unchanged")
        check((await value(client, "beams.tied0.weight"))[1] == "[0.25, 0.5]", "beams.tied0.weight stays too")
    finally:
        client.close()
        await client.wait_closed()


def main():
    tmp = tempfile.mkdtemp(prefix="cbf-katcp-names-")
    with Engine(FENG, os.path.join(tmp, "feng.yaml")) as e:
        asyncio.run(asyncio.wait_for(feng(e), 90))
        check(e.shutdown() == 0, "F-engine drains")
    with Engine(XB, os.path.join(tmp, "xb.yaml")) as e:
        asyncio.run(asyncio.wait_for(xb(e), 90))
        check(any("input0.dig-rms-dbfs" in line and "2 nodes" in line for line in e.log),
              "the two claims of input0.dig-rms-dbfs are warned of at start")
        check(e.shutdown() == 0, "X/B engine drains")
    print("PASS")


if __name__ == "__main__":
    main()
