#!/usr/bin/env python3
"""dsim's `signals` request in katgpucbf's signal language, through the
engine's katcp port with aiokatcp (as the product controller would send
katgpucbf's ?signals), on a realtime dsim stamped from the wall clock.

The qualification suite's strings are sent one after another, each once
the one before is in force; for each, the reply's `at` is the first
timestamp with the new signal, `dsim.steady-state-timestamp` follows it,
and once in force `dsim.signals` reads it as katgpucbf writes it (the same
entropy on both pols for a variable) and `dsim.period` its period. The
samples the filesink wrote are then held, segment by segment, against
katgpucbf's definitions (a float64 model here):

- `0;0;`: every sample 0;
- `common=nodither(wgn(0.1)); common; common;`: both pols the same samples,
  std 0.1 FS within five standard errors over one period;
- `cw(0.1, 400e6); cw(0.1, 400e6);`: within 1 LSB of 0.1 FS cos(2 pi w i / P),
  w = round(P f / fs) whole waves per period and i = t mod P (dither moves a
  sample by less than 1 LSB), the pols dithered independently;
- `common=wgn(0.03, 1);common;common;` with period 16384: repeats every
  16384 samples exactly, pols correlated but dithered apart, std as
  sqrt((0.03 FS)^2 + 1/6) (non-subtractive dither adds 1/6 LSB^2);
- `nodither(delay(wgn(0.05, 1), -8));nodither(wgn(0.05, 1));`: pol 0 is pol 1
  eight samples later, exactly; the same entropy as the segment before, so
  0.6 times these samples are within 1.5 LSB of those (same noise);
- multicw, with a period argument, within 1 LSB of its sum of cosines.

Then ?time (between two reads of the local clock, its timestamp the sample
of that time), and refusals naming the column and term, a wrong count of
expressions, a period that does not divide max-period, both forms at once.
In compute and in replay mode. katgpucbf's positional form (?signals
SIGNALS [PERIOD], reply the bare timestamp) is the katcp front end's to
map onto this request; here it is sent in the generic key=value form."""
import asyncio
import os
import re
import sys
import tempfile
import time

try:
    import aiokatcp
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP: {e.name} is not installed")
    sys.exit(77)

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "control"))
from ctl_util import Engine, check, fail  # noqa: E402

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cbf_h5  # noqa: E402

RATE = 1671875          # L-band's 1712 MHz / 1024: the suite's 400 MHz is not a multiple of it
SPC, BITS, PERIOD = 65536, 10, 65536
FULL = 2 ** (BITS - 1) - 1

# An engine of one real-time dsim recorded by filesink: %(dsim)s its params.
ENGINE = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
  sync_time: %%d
  adc_sample_rate: %%d
nodes:
  dsim:
    plugin: dsim
    params: {%(dsim)s}
  sink:
    plugin: filesink
    params: {path: %%s}
edges:
  - dsim.out -> sink.in
"""
YAML = ENGINE % {"dsim": "antennas: 1, bits: %d, samples_per_chunk: %d, length: 0, realtime: true,\n"
                         "             mode: %s, period: %d, signals: \"0;0;\", dither_seed: 12345"}

# (signals, period argument, what dsim.signals reads once in force: a
# regular expression, `(\\d+)` an entropy drawn for a wgn given none)
STEPS = [
    ("common=nodither(wgn(0.1)); common; common;", None,
     r"nodither\(wgn\(0\.1, (\d+)\)\); nodither\(wgn\(0\.1, \1\)\);"),
    ("cw(0.1, 400e6); cw(0.1, 400e6);", None,
     re.escape("cw(0.1, 400000000.0); cw(0.1, 400000000.0);")),
    ("common=wgn(0.03, 1);common;common;", 16384, re.escape("wgn(0.03, 1); wgn(0.03, 1);")),
    ("nodither(delay(wgn(0.05, 1), -8));nodither(wgn(0.05, 1));", None,
     re.escape("nodither(delay(wgn(0.05, 1), -8)); nodither(wgn(0.05, 1));")),
    ("multicw(3, 0.1, 0.0, 100e3, 20e3); multicw(3, 0.1, 0.0, 110e3, 20e3);", PERIOD,
     re.escape("multicw(3, 0.1, 0.0, 100000.0, 20000.0); multicw(3, 0.1, 0.0, 110000.0, 20000.0);")),
    ("0;0;", None, re.escape("0.0; 0.0;")),
]


def text(b):
    return b.decode() if isinstance(b, bytes) else str(b)


def fields(reply):
    return dict(text(a).split("=", 1) for a in reply)


async def sensor(client, name):
    _, informs = await client.request("sensor-value", name)
    return text(informs[0].arguments[4])


async def dsim_time(client):
    before = time.time()
    reply, _ = await client.request("time", "node=dsim")   # cbf's form: the time and its sample
    after = time.time()
    f = fields(reply)
    return before, float(f["time"]), after, int(f["timestamp"])


async def in_force(client, at, want_text, want_period):
    """Waits (10 s at most) until the dsim's clock is two chunks past at,
    so the chunk at `at` has gone and the next request starts a new one;
    then the sensors must show the signal."""
    deadline = time.monotonic() + 10
    while (await dsim_time(client))[3] < at + 2 * SPC:
        if time.monotonic() > deadline:
            fail(f"the dsim's clock did not pass {at + 2 * SPC}")
        await asyncio.sleep(0.02)
    got = await sensor(client, "dsim.signals")
    check(re.fullmatch(want_text, got) is not None, f"dsim.signals reads {got!r}")
    period = float(await sensor(client, "dsim.period"))
    check(period == want_period, f"dsim.period reads {period:g} (want {want_period})")


async def refused(client, want, *args):
    try:
        await client.request("signals", *args)
    except aiokatcp.FailReply as exc:
        check(all(w in str(exc) for w in want), f"?signals {' '.join(args)!r} fails: {exc}")
        return
    fail(f"?signals {' '.join(args)!r} was accepted")


async def session(e, sync):
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        check(await sensor(client, "dsim.max-period") == str(PERIOD), "dsim.max-period is 65536")
        _, informs = await client.request("sensor-list", "dsim.max-period")
        check(text(informs[0].arguments[3]) == "integer", "dsim.max-period is an integer sensor")
        check(await sensor(client, "dsim.dither-seed") == "12345", "dsim.dither-seed is the YAML's")
        check(await sensor(client, "dsim.signals-orig") == "0;0;", "dsim.signals-orig: the YAML's")
        # katgpucbf's dsim has them at the engine's level (its suite reads
        # SIM_TASK.max-period)
        for name in ("max-period", "sample-bits", "dither-seed", "signals", "signals-orig", "period"):
            a, b = await sensor(client, name), await sensor(client, "dsim." + name)
            check(a == b, f"{name} at the engine's level ({a!r}), as dsim.{name} ({b!r})")
        _, informs = await client.request("sensor-list", "max-period")
        check(text(informs[0].arguments[3]) == "integer", "max-period is an integer sensor")
        before, t, after, ts = await dsim_time(client)
        check(before <= t <= after and abs(ts - (t - sync) * RATE) <= 1,
              f"?time: {t:.6f} between the local clock's {before:.6f} and {after:.6f}, "
              f"timestamp {ts} its sample")
        # katgpucbf's own form: ?time alone, one float back.
        before = time.time()
        reply, _ = await client.request("time")
        after = time.time()
        check(len(reply) == 1 and before <= float(text(reply[0])) <= after,
              f"katgpucbf's ?time: {[text(a) for a in reply]} within [{before:.6f}, {after:.6f}]")
        ats = []
        for k, (signals, period, want) in enumerate(STEPS):
            if k % 2 == 0:   # the `common=` steps too: text holding `=`
                # katgpucbf's form (what its product controller sends):
                # ?signals SIGNALS [PERIOD], the first timestamp back alone.
                args = [signals] + ([str(period)] if period else [])
                reply, _ = await client.request("signals", *args)
                check(len(reply) == 1, f"katgpucbf's ?signals replies one value: {reply}")
                at = int(text(reply[0]))
            else:
                args = ["signals=" + signals] + ([f"period={period}"] if period else [])
                reply, _ = await client.request("signals", *args)
                at = int(fields(reply)["at"])
            check(not ats or at >= ats[-1] + SPC, f"?signals {signals!r}: first timestamp {at}")
            steady = int(await sensor(client, "dsim.steady-state-timestamp"))
            check(steady == at, f"dsim.steady-state-timestamp follows ({steady})")
            await in_force(client, at, want, period or PERIOD)
            check(await sensor(client, "dsim.signals-orig") == signals, "dsim.signals-orig: the text")
            ats.append(at)
        await refused(client, ["column 7", "cw(amplitude, frequency): frequency: expected a number",
                               "found 'foo'"], "signals=cw(1, foo);cw(1, 2);")
        await refused(client, ["column 28", "'nodither(wgn(0.1, 5))' cannot be used"],
                      "signals=c = nodither(wgn(0.1, 5)); c + 1; c;")
        await refused(client, ["expected 2 signals, received 1"], "signals=wgn(0.1);")
        await refused(client, ["column 7", "found 'foo'"], "cw(1, foo);cw(1, 2);")   # katgpucbf's form
        await refused(client, ["period 3 does not divide max-period 65536"], "0;0;", "3")
        await refused(client, ["period 3 does not divide max-period 65536"], "signals=0;0;", "period=3")
        await refused(client, ["period 131072 does not divide max-period 65536"], "signals=0;0;",
                      "period=131072")
        await refused(client, ["not both"], "signals=0;0;", "noise=0.1")
        check(await sensor(client, "dsim.signals") == "0.0; 0.0;", "refusals changed nothing")
        await client.request("halt")
    finally:
        client.close()
        await client.wait_closed()
    return ats


def model_cw(amps, freqs, period, t):
    out = np.zeros(len(t))
    for a, f in zip(amps, freqs):
        w = max(1, round(period * f / RATE)) % period
        out += a * np.cos(2 * np.pi * ((w * (t % period)) % period) / period)
    return out


def check_segments(path, ats):
    with h5py.File(path) as f:
        g = f["dsim"]
        ts = g["timestamp"][()]
        raw = g["data"][()]
    x = cbf_h5.unpack(raw, BITS)                        # [chunk][antenna][pol][sample]
    x = x[:, 0].transpose(1, 0, 2).reshape(2, -1)       # [pol][sample]
    t0 = int(ts[0])
    check(np.all(np.diff(ts) == SPC), f"{len(ts)} chunks, contiguous from {t0}")
    bounds = [t0] + ats + [t0 + x.shape[1]]

    def seg(k):
        lo, hi = bounds[k] - t0, bounds[k + 1] - t0
        return x[:, lo:hi], np.arange(bounds[k], bounds[k + 1], dtype=np.int64)

    s, _ = seg(0)
    check(np.all(s == 0), f"before the first request: {s.shape[1]} samples of 0;0;")
    # common=nodither(wgn(0.1)): the same samples on both pols, std 0.1 FS.
    s, _ = seg(1)
    n = min(s.shape[1], PERIOD)
    sd = s[0, :n].std()
    check(np.array_equal(s[0], s[1]) and abs(sd / (0.1 * FULL) - 1) < 5 / np.sqrt(2 * n),
          f"nodither(wgn(0.1)) shared: pols equal, std {sd:.2f} LSB (want {0.1 * FULL:.2f})")
    # cw(0.1, 400e6) dithered: within 1 LSB of the model, the pols apart.
    s, t = seg(2)
    err = np.abs(s - FULL * model_cw([0.1], [400e6], PERIOD, t)).max()
    check(err < 1 and not np.array_equal(s[0], s[1]),
          f"cw(0.1, 400e6): every sample within {err:.3f} LSB of the model, dithered per pol")
    # wgn(0.03, 1) with period 16384: exact repeats, correlated pols.
    s3, t = seg(3)
    p3 = 16384
    check(s3.shape[1] > p3 and np.array_equal(s3[:, p3:], s3[:, :-p3]),
          "period 16384: the samples repeat every 16384 exactly")
    rho = np.corrcoef(s3[0, :p3], s3[1, :p3])[0, 1]
    sd, want = s3[0, :p3].std(), np.sqrt((0.03 * FULL) ** 2 + 1 / 6)
    check(rho > 0.99 and not np.array_equal(s3[0], s3[1]) and abs(sd / want - 1) < 5 / np.sqrt(2 * p3),
          f"common=wgn(0.03, 1): pols correlate {rho:.5f}, dithered apart, std {sd:.2f} (want {want:.2f})")
    # delay(wgn(0.05, 1), -8): pol 0 is pol 1 eight samples on; entropy 1 again.
    s4, t4 = seg(4)
    check(np.array_equal(s4[0, :-8], s4[1, 8:]), "delay(..., -8): pol 0 is pol 1 eight samples later")
    i3, i4 = t % p3, t4 % PERIOD
    # Where both segments play period index i < 16384 of entropy 1's noise.
    a = {int(i): k for k, i in enumerate(i3)}
    pairs = [(a[int(i)], k) for k, i in enumerate(i4) if i < p3 and int(i) in a]
    d = max(abs(s3[1, j] - 0.6 * s4[1, k]) for j, k in pairs[:20000])
    check(len(pairs) > 1000 and d <= 1.5,
          f"wgn(0.03, 1) is 0.6 x wgn(0.05, 1) within {d:.2f} LSB on {len(pairs)} samples (one entropy)")
    # multicw: its sum of cosines, dithered.
    s, t = seg(5)
    err = max(np.abs(s[p] - FULL * model_cw([0.1] * 3, [f0 + k * 20e3 for k in range(3)], PERIOD, t)).max()
              for p, f0 in ((0, 100e3), (1, 110e3)))
    check(err < 1, f"multicw: every sample within {err:.3f} LSB of its sum of cosines")
    s, _ = seg(6)
    check(np.all(s == 0), f"0;0; again: {s.shape[1]} samples of 0")


ANTENNAS_YAML = ENGINE % {"dsim": "antennas: 2, bits: %d, samples_per_chunk: %d, length: 0, realtime: true, "
                                  "noise: 0,\n             tones: [{frequency: 1.0e+5, amplitude: 0.2}], period: %d"}

# Two antennas: (arguments, what dsim.signals reads once in force, the
# period: 0 while an input plays cbf's form in compute mode, which never
# repeats).
ANTENNA_STEPS = [
    (["signals=common=nodither(wgn(0.1)); common; common;", "antenna=1"], 0,
     r"cbf; cbf; nodither\(wgn\(0\.1, (\d+)\)\); nodither\(wgn\(0\.1, \1\)\);"),
    (["signals=nodither(wgn(0.1)); nodither(wgn(0.1));"], PERIOD,
     r"nodither\(wgn\(0\.1, (\d+)\)\); nodither\(wgn\(0\.1, (\d+)\)\); "
     r"nodither\(wgn\(0\.1, (\d+)\)\); nodither\(wgn\(0\.1, (\d+)\)\);"),
    (["signals=c = nodither(wgn(0.1)); c; c; c; c;"], PERIOD,
     r"nodither\(wgn\(0\.1, (\d+)\)\)(; nodither\(wgn\(0\.1, \1\)\)){3};"),
    (["noise=0.1"], 0, re.escape("cbf; cbf; cbf; cbf;")),
]


async def antenna_session(e):
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        ats = []
        texts = []
        for args, period, want in ANTENNA_STEPS:
            reply, _ = await client.request("signals", *args)
            ats.append(int(fields(reply)["at"]))
            await in_force(client, ats[-1], want, period)
            texts.append(await sensor(client, "dsim.signals"))
        drawn = re.fullmatch(ANTENNA_STEPS[1][2], texts[1]).groups()
        check(len(set(drawn)) == 4, f"each antenna's parse drew its own entropies {drawn}")
        await refused(client, ["antenna 2 of 2"], "signals=0;0;", "antenna=2")
        await refused(client, ["antenna picks the antenna of a signal in katgpucbf's language"],
                      "antenna=0", "noise=0.2")
        await refused(client, ["expected 2 signals (or 4, one per input), received 3"],
                      "signals=0;0;0;")
        await client.request("halt")
    finally:
        client.close()
        await client.wait_closed()
    return ats


def check_antennas(path, ats):
    """[input][sample] per segment: one antenna changed, each antenna its
    own parse, one output per input, cbf's form back on every input."""
    with h5py.File(path) as f:
        g = f["dsim"]
        ts = g["timestamp"][()]
        x = cbf_h5.unpack(g["data"][()], BITS)         # [chunk][antenna][pol][sample]
    x = x.reshape(x.shape[0], 4, -1).transpose(1, 0, 2).reshape(4, -1)
    t0 = int(ts[0])
    b = [a - t0 for a in ats] + [x.shape[1]]
    t = np.arange(b[0], b[1], dtype=np.int64) + t0
    tone = np.rint(FULL * 0.2 * np.cos(2 * np.pi * 1e5 * t / RATE))
    seg = x[:, b[0]:b[1]]
    check(np.abs(seg[:2] - tone).max() == 0 and np.array_equal(seg[2], seg[3]) and seg[2].std() > 40,
          "antenna=1: antenna 0 keeps cbf's tone, antenna 1 plays the shared noise on both pols")
    seg = x[:, b[1]:b[2]][:, :PERIOD]
    r = np.corrcoef(seg)
    off = np.abs(r[~np.eye(4, dtype=bool)]).max()
    check(off < 5 / np.sqrt(seg.shape[1]),
          f"two expressions for two antennas: each input its own noise (|correlation| <= {off:.4f})")
    seg = x[:, b[2]:b[3]]
    check(all(np.array_equal(seg[0], seg[i]) for i in range(1, 4)) and seg[0].std() > 40,
          "one expression per input: c on every input, the same samples")
    seg = x[:, b[3]:b[4]]
    sd = seg.std(axis=1)
    check(np.all(np.abs(sd / (0.1 * FULL) - 1) < 0.05) and abs(np.corrcoef(seg)[0, 2]) < 0.05,
          f"cbf's noise=0.1 after the language: no tone left, std {np.round(sd, 1)} LSB")


def main():
    sync = int(time.time()) - 100
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "ants.h5")
        e = Engine(ANTENNAS_YAML % (sync, RATE, BITS, SPC, PERIOD, path), os.path.join(tmp, "e.yaml"))
        try:
            ats = asyncio.run(antenna_session(e))
            code = e.proc.wait(timeout=60)
            if code:
                fail(f"antennas: engine exited {code}: {''.join(e.log)}")
        finally:
            e.kill()
        print("two antennas:")
        check_antennas(path, ats)
    for mode in ("compute", "replay"):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "out.h5")
            e = Engine(YAML % (sync, RATE, BITS, SPC, mode, PERIOD, path), os.path.join(tmp, "e.yaml"))
            try:
                ats = asyncio.run(session(e, sync))
                code = e.proc.wait(timeout=60)
                if code:
                    fail(f"{mode}: engine exited {code}: {''.join(e.log)}")
            finally:
                e.kill()
            print(f"{mode}:")
            check_segments(path, ats)
    return 0


if __name__ == "__main__":
    sys.exit(main())
