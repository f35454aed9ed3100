"""A product with a narrowband channeliser beside the wideband one, as
katgpucbf's qualification suite configures narrowband (conftest.py: the
narrowband channeliser with its correlator and beams, and a wideband copy
with its own correlator), run by cbf-controller over loopback:

- configure plans two sets of engines: 4 dsims, 4 + 4 F-engines (the
  wideband set's c1-feng0..3), 4 + 4 X-engines, each channeliser's
  stream sensors its own (n-chans, bandwidth, center-freq, destination,
  tasks);
- both correlators' visibilities and the narrowband beams leave (their
  senders' heaps climb on every X-engine of each set);
- ?gain on the wideband channeliser lands on the wideband F-engine of that
  input (its post.input0.eq), not on the narrowband one;
- killing a wideband F-engine flags that input pair in the wideband
  channeliser's input-data-suspect only;
- deconfigure leaves no engine;
- then a product of the VLBI form (narrowband.vlbi, no channel
  discarded) and its correlator: its stream sensors say the band and the
  pass band, its F-engines' ddcs subsample by 16 over that pass band, and
  its visibilities leave.

usage: test_narrowband.py CBF_CONTROLLER CBF_RUN"""
import asyncio
import json
import os
import pathlib
import signal
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_controller import DEADLINE, check, engine_pid, processes_in, text, until, value  # noqa: E402

import aiokatcp  # noqa: E402

NB, WB = "antenna-channelised-voltage", "wideband-antenna-channelised-voltage"
NBCP, WBCP = "baseline-correlation-products", "wideband-baseline-correlation-products"
RATE = 1712e6


def vlbi_product():
    p = product()
    out = p["outputs"]
    for name in [WB, WBCP, "tied-array-channelised-voltage-0x", "tied-array-channelised-voltage-0y"]:
        del out[name]
    out[NB]["narrowband"]["vlbi"] = {"pass_bandwidth": 64e6}
    return p


def product():
    outputs = {}
    for d in range(4):
        for pol in "hv":
            outputs[f"dsim{d:03}{pol}"] = {"type": "sim.dig.baseband_voltage", "band": "l",
                                           "adc_sample_rate": RATE, "centre_frequency": 1284e6,
                                           "antenna": f"dsim{d:03}, 0:0:0, 0:0:0, 0, 0"}
    src = [f"dsim{d:03}{pol}" for d in range(4) for pol in "hv"]
    labels = [f"m{800 + d}{pol}" for d in range(4) for pol in "hv"]
    outputs[NB] = {"type": "gpucbf.antenna_channelised_voltage", "src_streams": src, "input_labels": labels,
                   "n_chans": 1024, "narrowband": {"decimation_factor": 8,
                                                   "centre_frequency": RATE * 3456789 / 2**24}}
    outputs[WB] = {"type": "gpucbf.antenna_channelised_voltage", "src_streams": src, "input_labels": labels,
                   "n_chans": 1024}
    outputs[WBCP] = {"type": "gpucbf.baseline_correlation_products", "src_streams": [WB], "int_time": 0.0006}
    outputs[NBCP] = {"type": "gpucbf.baseline_correlation_products", "src_streams": [NB], "int_time": 0.0006}
    for i, pol in enumerate("xy"):
        outputs[f"tied-array-channelised-voltage-0{pol}"] = {"type": "gpucbf.tied_array_channelised_voltage",
                                                            "src_streams": [NB], "src_pol": i}
    # int_time is the band's time: at clock_ratio 0.001 a dump of 0.6 ms
    # (two narrowband heaps) takes 0.6 s of the wall's
    return {"version": "4.7", "config": {}, "inputs": {}, "outputs": outputs,
            "simulation": {"clock_ratio": 0.001}}


async def heaps(pc, pattern):
    _, informs = await pc.request("sensor-value", pattern)
    return {i.arguments[2].decode(): int(i.arguments[4]) for i in informs if i.arguments[3] == b"nominal"}


async def climbing(pc, pattern, n, what):
    """Until each of the n sensors matching pattern (POSIX extended regex,
    as katcp servers take it) has risen once."""
    first = None

    async def up():
        nonlocal first
        now = await heaps(pc, pattern)
        if len(now) < n:
            return False
        if first is None:
            first = now
            return False
        return all(now[k] > first[k] for k in first)
    await until(up, what, 2 * DEADLINE)


async def session(master_port, state):
    master = await aiokatcp.Client.connect("127.0.0.1", master_port)
    reply, _ = await master.request("product-configure", "nb", json.dumps(product()))
    pc = await aiokatcp.Client.connect(reply[1].decode(), int(reply[2]))
    watcher = aiokatcp.SensorWatcher(pc)
    pc.add_sensor_watcher(watcher)
    await asyncio.wait_for(watcher.synced.wait(), DEADLINE)
    s = watcher.sensors
    check(s[f"{NB}.n-chans"].value == 1024 and s[f"{WB}.n-chans"].value == 1024 and
          s[f"{NB}.n-samples-between-spectra"].value == 16384, "each channeliser's figures")
    check(s[f"{NB}.bandwidth"].value == RATE / 16 and s[f"{WB}.bandwidth"].value == RATE / 2, "and bandwidth")
    tasks = json.loads(text(s[f"{WBCP}.tasks"].value))
    check(tasks == [f"xb.{WBCP}.{i}" for i in range(4)], f"{WBCP}.tasks {tasks}")
    check(json.loads(text(s[f"{WB}.tasks"].value)) == [f"f.{WB}.{i}" for i in range(4)], f"{WB}.tasks")
    check(text(s[f"{NB}.destination"].value) != text(s[f"{WB}.destination"].value), "their own groups")
    print(f"ok: two channelisers configured, {len(s)} sensors")

    await pc.request("capture-start", NBCP)
    await pc.request("capture-start", WBCP)
    await pc.request("capture-start", "tied-array-channelised-voltage-0x")
    await climbing(pc, rf"/^xb\.{NBCP}\.[0-9]\.vsend\.heaps$/", 4, "narrowband visibilities from 4 X-engines")
    await climbing(pc, rf"/^xb\.{WBCP}\.[0-9]\.vsend\.heaps$/", 4, "wideband visibilities from 4 X-engines")
    await climbing(pc, rf"/^xb\.{NBCP}\.[0-9]\.bsend\.heaps$/", 4, "narrowband beams from 4 X-engines")
    print("ok: both correlators' visibilities and the narrowband beams leave")

    await pc.request("gain", WB, "m802h", "0.25+0.5j")
    wide_eq, narrow_eq = f"f.{WB}.2.post.input0.eq", f"f.{NB}.2.post.input0.eq"
    await until(lambda: value(watcher, wide_eq) == "[0.25+0.5j]", f"{wide_eq} shows the gain")
    check(value(watcher, narrow_eq) != "[0.25+0.5j]", f"{narrow_eq} does not: {value(watcher, narrow_eq)}")
    check(value(watcher, f"{WB}.m802h.eq") == "[0.25+0.5j]", f"{WB}.m802h.eq, the renamed one, too")
    print("ok: ?gain on the wideband channeliser reached its F-engine only")

    history = []
    watcher.sensors[f"{WB}.input-data-suspect"].attach(lambda _s, r: history.append(text(r.value)))
    narrow = []
    watcher.sensors[f"{NB}.input-data-suspect"].attach(lambda _s, r: narrow.append(text(r.value)))
    pid = engine_pid(state, "nb", "c1-feng1")
    check(pid, "c1-feng1's process")
    os.kill(pid, signal.SIGKILL)
    await until(lambda: "00110000" in history and history[-1] == "00000000", "c1-feng1 down and up again")
    check(set(history) == {"00110000", "00000000"} and "00110000" not in narrow,
          f"only the wideband channeliser's m801 flagged: {history}, narrowband {narrow}")
    print(f"ok: c1-feng1 killed: {WB}.input-data-suspect {history}")
    pc.close()
    await master.request("product-deconfigure", "nb")
    check(not processes_in(state), f"engines left: {processes_in(state)}")
    print("ok: deconfigured, no engine left")

    reply, _ = await master.request("product-configure", "vlbi", json.dumps(vlbi_product()))
    pc = await aiokatcp.Client.connect(reply[1].decode(), int(reply[2]))
    watcher = aiokatcp.SensorWatcher(pc)
    pc.add_sensor_watcher(watcher)
    await asyncio.wait_for(watcher.synced.wait(), DEADLINE)
    s = watcher.sensors
    check(s[f"{NB}.n-chans"].value == 1024 and s[f"{NB}.bandwidth"].value == RATE / 16 and
          s[f"{NB}.pass-bandwidth"].value == 64e6 and s[f"{NB}.n-samples-between-spectra"].value == 16384,
          "the VLBI channeliser's figures")
    feng = (state / "vlbi" / "feng0.yaml").read_text()
    check("decimation: 16, pass_bandwidth: 64000000}" in feng, f"feng0.yaml's ddc keeps the whole band:\n{feng}")
    await pc.request("capture-start", NBCP)
    await climbing(pc, rf"/^xb\.{NBCP}\.[0-9]\.vsend\.heaps$/", 4, "VLBI visibilities from 4 X-engines")
    print("ok: a VLBI channeliser configured and its visibilities leave")
    pc.close()
    await master.request("product-deconfigure", "vlbi")
    check(not processes_in(state), f"engines left: {processes_in(state)}")
    master.close()


async def main():
    controller, cbf_run = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cbf-narrowband-test-"))
    # heaps of 32768 values: 32 spectra (the beamformer's least) of 16384
    # samples narrowband (0.3 s at this clock ratio's pace), of 2048 wideband
    (tmp / "controller.yaml").write_text(
        f"controller:\n  cbf_run: {cbf_run}\n  state_dir: state\n  start_timeout: {DEADLINE}\n"
        "  jones_per_batch: 32768\n"
        "ranges:\n  multicast: 239.54.0.0/24\n  udp_ports: 9830-9869\n  engine_katcp: 9870-9929\n"
        "  product_katcp: 9930-9939\nrestart:\n  initial: 0.05\n  max: 1\n  reset_after: 60\n")
    proc = subprocess.Popen([controller, "--config", str(tmp / "controller.yaml"), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), DEADLINE)
        check(line.startswith("cbf-controller: master controller on 127.0.0.1:"), f"first line {line!r}")
        await session(int(line.rsplit(":", 1)[1]), tmp / "state")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, DEADLINE)
    check(rc == 0, f"cbf-controller exited {rc}")
    check(not processes_in(tmp), "nothing left after the controller stopped")


if __name__ == "__main__":
    asyncio.run(main())
