"""The engine's time reference (engine keys sync_time, adc_sample_rate)
through real cbf-run engines, cbf-ctl, aiokatcp and h5py:

- an F-engine whose dsim stamps samples from the wall clock (realtime: true
  with a sync_time): its first timestamp lies between the clock read before
  the engine started and the one read once data was written (plus the heap
  it rounds up to), and no chunk leaves before its last sample's time;
- a gain change at a UNIX time (cbf-ctl --at-unix, a decimal string with
  sub-sample digits) lands on the timestamp round((unix - sync_time) x rate)
  and so on the spectrum the gains record in the HDF5 file says; the same
  with at_unix over katcp's generic form; both at and at_unix, or a time
  before the sync time, refused;
- katgpucbf's ?delays stream start-time model... over aiokatcp: one model
  for both pols, then one per pol, each recorded at its start time's
  timestamp; malformed models, a wrong count and a start before the sync
  time refused;
- steady-state-timestamp rises to each accepted request's timestamp;
- the HDF5 file carries sync_time and adc_sample_rate (file and group), and
  cbf_h5.unix_time turns its timestamps into UNIX time;
- receiver and sender sensors rx.timestamp, rx.unixtime, rx.missing-unixtime
  and tx.next-timestamp in a loopback engine, on chunk boundaries and moving;
- the engine's adc_sample_rate is the rate of every dsim and receiver that
  gives none (else they would state their 1712e6 default and be refused);
- an engine without sync_time refuses at_unix; a stage whose ADC rate
  differs from the engine's, and a realtime dsim given both a start and a
  sync_time, stop the start with messages naming both places."""
import asyncio
import json
import os
import socket
import subprocess
import sys
import tempfile
import time
from decimal import Decimal

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ctl_util import CBF_RUN, Engine, check, fail  # noqa: E402

try:
    import aiokatcp
    import h5py
    import numpy as np
except ImportError as e:
    print(f"SKIP: {e.name} is not installed")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cbf_h5  # noqa: E402

RATE, CHANNELS, SPH, SPC, HEAP = 1000000, 256, 64, 65536, 4096
STEP = 2 * CHANNELS              # samples between spectra
BUF = SPH * STEP                 # samples per fft_post buffer
AHEAD = 40 * BUF                 # how far ahead of the data a timed request aims (1.3 s)

FENG = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
  sync_time: %s
  adc_sample_rate: %d
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, samples_per_chunk: %d, length: 0, realtime: true, noise: 0.05}
  pfb:
    plugin: pfb
    params: {channels: %d, taps: 4, spectra_per_buffer: %d}
  post:
    plugin: fft_post
    params: {spectra_per_heap: %d, gain: [0.02, 0.0]}
  sink:
    plugin: filesink
    params: {path: %s}
edges:
  - dsim.out -> sink.in
  - dsim.out -> pfb.in
  - pfb.out -> post.in
  - post.out -> sink.in
  - post.gains -> sink.in
  - pfb.delays -> sink.in
"""


def sensors(e):
    rc, reply, err = e.request({"request": "sensors"})
    if rc != 0:
        fail(f"sensors request: {err}")
    return reply["sensors"]["nodes"]


def written(e, n):
    """Waits until the sink has written n buffers (of all its inputs), 30 s at most."""
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if sensors(e)["sink"]["counters"]["buffers_written"] >= n:
            return
    fail(f"the sink did not write {n} buffers")


def next_ts(e):
    """The next timestamp fft_post will process: a gain of 0.02 (unchanged)
    at -1 answers it, and counts as a change in the record. Asked once post
    has made a batch: before its first buffer post answers 0, which the
    wall-clock stream (timestamps from sync_time, 1000 s back) left long
    ago; the sink's first buffer can be the dsim's alone, so written() does
    not say that (seen on a loaded CI machine)."""
    deadline = time.monotonic() + 30
    while sensors(e)["post"]["counters"]["batches"] < 1:
        if time.monotonic() > deadline:
            fail("fft_post made no batch in 30 s")
    rc, out, err = e.ctl("--json", "gain", "--node", "post", "0.02", "0")
    check(rc == 0, f"gain at the next spectrum: {out}{err}")
    return json.loads(out)["at"]


def unix_of(sync, ts, offset=Decimal(0)):
    """The decimal UNIX time of timestamp ts (+ offset samples), every digit kept."""
    return str(Decimal(sync) + (Decimal(ts) + offset) / Decimal(RATE))


def steady(e, node):
    return sensors(e)[node]["counters"]["steady_state_timestamp"]


async def katcp_checks(e, sync, gains_at):
    """Timed requests from gains_at[-1] on: AHEAD after the data when asked,
    and the ones here follow within a few buffers."""
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        _, informs = await client.request("help", "delays")
        check("at=-1 (or at_unix=UNIX_SECONDS)" in informs[0].arguments[1].decode(),
              "?help delays offers at_unix")
        base = gains_at[-1]
        # katcp's generic form with at_unix, in the next buffer (fft_post
        # takes one change per buffer): 0.3 samples before t rounds to t.
        t = (base // BUF + 1) * BUF + 3 * STEP + 7
        reply, _ = await client.request("gain", "node=post", "values=[0.05, 0]",
                                        "at_unix=" + unix_of(sync, t, Decimal("-0.3")))
        got = dict(a.decode().split("=", 1) for a in reply[1:])
        check(int(got["at"]) == t, f"?gain ... at_unix=: at {got['at']} == {t}")
        gains_at.append(t)

        # ?delays: equal models go as one change for both pols.
        td = (base // BUF + 2) * BUF + 9 * STEP
        await client.request("delays", "pfb", unix_of(sync, td), "0,0:1.25,0", "0,0:1.25,0")
        check(steady(e, "pfb") == td, f"?delays: steady-state-timestamp of pfb is {td}")
        # Different models per pol, 0.4 samples after timestamp td2.
        td2 = td + 2 * BUF + 5 * STEP
        await client.request("delays", "pfb", unix_of(sync, td2, Decimal("0.4")), "0,0:0.5,0",
                             "1e-9,0:-0.5,2")
        check(steady(e, "pfb") == td2, f"?delays per pol: steady-state-timestamp of pfb is {td2}")
        for args, want in [
            (("pfb", unix_of(sync, td2 + BUF), "0,0:0,0"), "wrong number of delay coefficient sets"),
            (("pfb", unix_of(sync, td2 + BUF), "0,0:0", "0,0:0,0"), "model 1: '0,0:0'"),
            (("pfb", unix_of(sync, td2 + BUF), "0,0:0,0", "0,x:0,0"), "model 2"),
            (("pfb", "1000.5", "0,0:0,0", "0,0:0,0"), "before the engine's sync_time"),
            (("pfb", "soon", "0,0:0,0", "0,0:0,0"), "is not UNIX seconds"),
            # the start time left out: said so, in katgpucbf's terms
            (("pfb", "0,0:0,0", "0,0:0,0"), "START-TIME is missing: argument 2 ('0,0:0,0') is a delay model"),
            (("nosuch", unix_of(sync, td2 + BUF), "0,0:0,0", "0,0:0,0"), "no node 'nosuch'"),
        ]:
            try:
                await client.request("delays", *args)
                fail(f"?delays {' '.join(args)} was accepted")
            except aiokatcp.FailReply as exc:
                check(want in str(exc), f"?delays {' '.join(args[1:])}: fail '{exc}'")
        check(steady(e, "pfb") == td2, "refused requests leave steady-state-timestamp as it was")
        _, informs = await client.request("sensor-value", "pfb.steady-state-timestamp")
        check(int(informs[0].arguments[4]) == td2, "katcp's pfb.steady-state-timestamp says so too")
        # A start time already past (katgpucbf's suite sends the sync time
        # itself): valid from the spectrum after the pending ones were
        # processed, the polynomial still about the sync time.
        while True:   # until td2's models are in force (the test's deadline bounds it)
            _, informs = await client.request("sensor-value", "pfb.input1.delay")
            if informs[0].arguments[4].decode().endswith(", -0.5, 2.0)"):
                break
            await asyncio.sleep(0.05)
        await client.request("delays", "pfb", sync, "0,0:0.75,0", "0,0:0.75,0")
        td3 = steady(e, "pfb")
        check(td3 > td2 and td3 % STEP == 0, f"?delays at the sync time: valid from spectrum {td3 // STEP}, "
              f"after td2 ({td2})")
        return td, td2, td3
    finally:
        client.close()
        await client.wait_closed()


def feng(tmp):
    # A sync time 1000 s ago, with nanosecond digits a double cannot hold.
    sync = f"{int(time.time()) - 1000}.123456789"
    path = os.path.join(tmp, "feng.h5")
    t_a = time.time()
    e = Engine(FENG % (sync, RATE, SPC, CHANNELS, SPH, SPH, path), os.path.join(tmp, "feng.yaml"))
    try:
        written(e, 1)
        t_b = time.time()
        rc, out, err = e.ctl("--json", "requests")
        arg = [a for r in json.loads(out)["requests"] if r["name"] == "gain" for a in r["args"]
               if a["name"] == "at"]
        check(rc == 0 and arg and arg[0].get("timestamp") is True,
              "`requests` marks gain's `at` as a timestamp (at_unix accepted)")

        base = next_ts(e)
        check(steady(e, "post") == base, f"steady-state-timestamp of post follows the reply ({base})")
        # A UNIX time 0.4 samples before timestamp t: t is 1 past a spectrum
        # boundary, so rounding (t) and truncating (t - 1) pick different
        # spectra.
        t = (base // BUF) * BUF + AHEAD + 17 * STEP + 1
        rc, out, err = e.ctl("--json", "gain", "--node", "post", "--pol", "1", "--at-unix",
                             unix_of(sync, t, Decimal("-0.4")), "0.01", "0")
        check(rc == 0 and json.loads(out)["at"] == t, f"cbf-ctl gain --at-unix: at {out.strip()} == {t}")
        check(steady(e, "post") == t, f"steady-state-timestamp of post rose to {t}")
        gains_at = [base, t]
        for req, want in [
            ({"at": t + BUF, "at_unix": unix_of(sync, t + BUF)}, "not both"),
            ({"at_unix": "1000.5"}, "before the engine's sync_time"),
            ({"at_unix": "noon"}, "is not UNIX seconds"),
        ]:
            rc, reply, err = e.request({"request": "gain", "node": "post", "values": [1.0], **req})
            check(rc == 1 and want in err, f"gain {req}: refused ({err.strip()})")

        td, td2, td3 = asyncio.run(asyncio.wait_for(katcp_checks(e, sync, gains_at), 60))
        written(e, 4 * ((td3 + 4 * BUF) // SPC - (base // SPC)))
        check(e.shutdown() == 0, "engine drained and exited 0")
        t_c = time.time()
    finally:
        e.kill()

    with h5py.File(path) as f:
        check(float(f.attrs["sync_time"]) == float(sync) and float(f.attrs["adc_sample_rate"]) == RATE,
              f"file attributes sync_time {f.attrs['sync_time']!r}, adc_sample_rate {f.attrs['adc_sample_rate']}")
        d = f["dsim"]
        check(float(d.attrs["sync_time"]) == float(sync) and "sync_time_note" not in d.attrs and
              float(d.attrs["scale_factor_timestamp"]) == RATE, "group attributes carry the time reference")
        ts = d["timestamp"][()]
        # The dsim read the clock between t_a and t_b and rounded up to a
        # heap; float(sync) is within 0.25 us (a quarter sample) of sync.
        lo, hi = (t_a - float(sync)) * RATE - 1, (t_b - float(sync)) * RATE + HEAP + 1
        check(lo <= ts[0] <= hi and ts[0] % HEAP == 0,
              f"dsim's first timestamp {ts[0]} is the wall clock's sample: in [{lo:.0f}, {hi:.0f}] "
              f"(a window of {(hi - lo) / RATE:.3f} s)")
        check(np.all(np.diff(ts) == SPC), "then one chunk after another")
        check(ts[-1] + SPC <= (t_c - float(sync)) * RATE + 1,
              f"no chunk left before its last sample's time (last ends at {ts[-1] + SPC}, clock at "
              f"{(t_c - float(sync)) * RATE:.0f} after shutdown)")
        u = cbf_h5.unix_time(d, ts[:1])[0]
        check(abs(u - (float(sync) + ts[0] / RATE)) < 1e-6, f"cbf_h5.unix_time: {u:.6f}")

        g = [f[k] for k in f if f[k].attrs["type"] == b"cbf.feng.gains"][0]
        gts, tab = g["timestamp"][()], g["data"][()]
        want = [-(-at // STEP) * STEP for at in gains_at]
        check(list(gts[1:]) == want and tab[2, 0, 1, 0] == np.float32(0.01) and
              tab[3, 0, 0, 0] == np.float32(0.05),
              f"each gain change took effect at the spectrum its UNIX time names: {list(gts[1:])} == {want}")
        dl = f["pfb"]
        dts, model = dl["timestamp"][()], dl["data"][()]   # [n][pol][t0, d, rate, phase, phase_rate]
        check(list(dts[1:]) == [td, td2, td3], f"delay models recorded at {list(dts[1:])} == {[td, td2, td3]}")
        check(np.all(model[3, :, 0] == 0) and np.all(model[3, :, 3] == 0.75),
              f"the late model keeps the sync time (timestamp 0) as its reference: {model[3].tolist()}")
        check(np.all(model[1, :, 3] == 1.25) and list(model[2, :, 3]) == [0.5, -0.5] and
              model[2, 1, 1] == 1e-9 and model[2, 1, 4] == 2 and model[2, 0, 4] == 0,
              f"?delays models as given, one per pol: {model[1:].tolist()}")


NET = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  katcp: 127.0.0.1:0
  sync_time: 1700000000.25
  adc_sample_rate: 1048576
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, bits: 8, samples_per_chunk: %d, length: 0, noise: 0.05, missing: [5]}
  send:
    plugin: sender
    params: {destinations: "127.0.0.1:%d", rate_gbps: 0.05}
  recv:
    plugin: receiver
    params: {address: "127.0.0.1:%d", antennas: 1, bits: 8, samples_per_chunk: %d}
  idle:
    plugin: discard
edges:
  - dsim.out -> send.in
  - recv.out -> idle.in
"""


async def katcp_names(e):
    """Over katcp the sensors carry katgpucbf's names (NODE. in front)."""
    client = await aiokatcp.Client.connect(*e.katcp)
    try:
        _, informs = await client.request("sensor-list", r"/\.(rx|tx)\./")
        names = sorted(m.arguments[0].decode() for m in informs)
        want = ["recv.rx.missing-unixtime", "recv.rx.synchronised", "recv.rx.timestamp", "recv.rx.unixtime",
                "send.tx.next-timestamp"]
        check(names == want, f"katcp sensors {names}")
        _, informs = await client.request("sensor-value", "recv.rx.unixtime")
        a = informs[0].arguments
        check(a[3] == b"nominal" and float(a[4]) > 1700000000.25, f"?sensor-value recv.rx.unixtime: {a}")
    finally:
        client.close()
        await client.wait_closed()


def net(tmp):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    e = Engine(NET % (SPC, port, port, SPC), os.path.join(tmp, "net.yaml"))
    sync, rate = 1700000000.25, 1048576      # a chunk is 1/16 s: UNIX times exact in a double
    try:
        seen = []
        deadline = time.monotonic() + 30
        # Until rx.timestamp has taken two values and tx.next-timestamp has
        # moved: the sender takes the next chunk at its own pace (paced, on its
        # own thread), so a chunk received need not find the sender a chunk
        # further on; under load it may still hold the one just received.
        while not (len(seen) >= 2 and seen[-1][3] > seen[0][3]) and time.monotonic() < deadline:
            n = sensors(e)
            rx, tx = n["recv"], n["send"]
            ts = rx["counters"]["rx.timestamp"]
            if ts > 0 and (not seen or ts > seen[-1][0]):
                seen.append((ts, rx["gauges"]["rx.unixtime"], rx["gauges"]["rx.missing_unixtime"],
                             tx["counters"]["tx.next_timestamp"]))
        check(len(seen) >= 2, f"rx.timestamp moves: {[s[0] for s in seen]}")
        for ts, ux, miss, nxt in seen:
            check(ts % SPC == 0 and (ux - sync) * 16 == round((ux - sync) * 16) and
                  abs(ux - (sync + ts / rate)) <= 2 * SPC / rate,
                  f"rx.timestamp {ts} on a chunk, rx.unixtime {ux!r} its UNIX time (within the chunk "
                  f"or two the two reads may be apart)")
            # dsim flags heap 5 (chunk 0) missing: the sender leaves it out.
            check(miss is not None and miss >= sync and (miss - sync) * 16 == round((miss - sync) * 16)
                  and miss <= ux, f"rx.missing-unixtime {miss!r}: a chunk's UNIX time, not after rx.unixtime")
            check(nxt > 0 and nxt % SPC == 0, f"tx.next-timestamp {nxt} past a whole chunk")
        check(seen[-1][3] > seen[0][3], f"tx.next-timestamp moves: {[s[3] for s in seen]}")
        asyncio.run(asyncio.wait_for(katcp_names(e), 30))
        check(e.shutdown() == 0, "loopback engine drained and exited 0")
    finally:
        e.kill()


PLAIN = """
engine:
  gpu: none
  control: tcp://127.0.0.1:*
  %s
nodes:
  dsim:
    plugin: dsim
    params: {antennas: 1, samples_per_chunk: 65536, length: 0, realtime: true, %s}
  idle:
    plugin: discard
edges:
  - dsim.out -> idle.in
"""


def refusals(tmp):
    e = Engine(PLAIN % ("adc_sample_rate: 1e6", "adc_sample_rate: 1e6"), os.path.join(tmp, "plain.yaml"))
    try:
        rc, reply, err = e.request({"request": "signals", "at_unix": "1700000000"})
        check(rc == 1 and "has no sync_time" in err and "give 'at'" in err,
              f"at_unix without sync_time: refused ({err.strip()})")
        check(e.shutdown() == 0, "and the engine still drains")
    finally:
        e.kill()
    for engine, params, want in [
        ("sync_time: 1700000000\n  adc_sample_rate: 1e6", "adc_sample_rate: 2e6",
         ["engine.adc_sample_rate is 1000000 Hz", "node 'dsim'", "plain2.yaml:8:3", "2000000 Hz",
          "plain2.yaml:6:20"]),
        ("sync_time: 1700000000\n  adc_sample_rate: 1e6", "start: 4096",
         ["start: with realtime: true and the engine's sync_time", "plain2.yaml:10:"]),
    ]:
        path = os.path.join(tmp, "plain2.yaml")
        with open(path, "w") as f:
            f.write(PLAIN % (engine, params))
        r = subprocess.run([CBF_RUN, path], capture_output=True, text=True, timeout=60)
        check(r.returncode != 0 and all(w in r.stderr for w in want),
              f"{params} with {engine.splitlines()[0]}: refused at start ({r.stderr.strip()})")


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-time-") as tmp:
        refusals(tmp)
        net(tmp)
        feng(tmp)
    print("PASS")


if __name__ == "__main__":
    main()
