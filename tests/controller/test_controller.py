"""cbf-controller driven as katgpucbf's qualification suite drives katsdpcontroller.

    test_controller.py CBF_CONTROLLER CBF_RUN DATA_DIR     (plugins from $CBF_PLUGIN_PATH)

Starts cbf-controller (port 0, a scratch state folder, the local launcher),
configures the suite-style 4-antenna wideband product with beams
(data/suite-4ant-wide-beams.json, clock_ratio 0.001 for a 2-core CPU),
reads the product controller's sensors through aiokatcp's SensorWatcher,
sends the product requests and reads their effect in the engines' sensors
under the product's stream names (ACV.LABEL.eq, BCP.N.chan-range, the
summed clip counts), runs a second product beside it, kills an
F-engine and watches its state and input-data-suspect bits, and checks that
deconfigure and the controller's own stop leave no engine or port behind.
Every wait polls a condition with a deadline. docs/controller.md, "Running
cbf-controller", shows the same session.
"""

import asyncio
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import tempfile
import time

import aiokatcp

DEADLINE = 60.0   # for anything a loaded 2-core machine does
ACV = "antenna-channelised-voltage"
BCP = "baseline-correlation-products"
BEAM0 = "tied-array-channelised-voltage-0x"


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def text(v):
    """A sensor's value as katcp writes it: aiokatcp decodes strings as bytes
    and discrete values as enums."""
    return aiokatcp.encode(v).decode() if not isinstance(v, str) else v


async def until(pred, what, deadline=DEADLINE):
    end = time.monotonic() + deadline
    while True:
        v = await pred() if asyncio.iscoroutinefunction(pred) else pred()
        if v:
            return v
        if time.monotonic() > end:
            raise AssertionError(f"not within {deadline} s: {what}")
        await asyncio.sleep(0.05)


async def refused(client, *req, want):
    try:
        await client.request(*req)
    except aiokatcp.FailReply as e:
        check(want in str(e), f"?{req[0]} refused with {str(e)!r}, which does not say {want!r}")
        return str(e)
    raise AssertionError(f"?{req[0]} {req[1:3]} was not refused")


def processes_in(folder):
    """(pid, command line) of every process running in a folder under folder."""
    found = []
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                cwd = os.readlink(f"/proc/{d}/cwd")
                cmd = pathlib.Path(f"/proc/{d}/cmdline").read_bytes().split(b"\0")
            except OSError:
                continue
            if cwd.startswith(str(folder) + "/"):
                found.append((int(d), cmd))
    return found


def engine_pid(state, product, engine):
    for pid, cmd in processes_in(state):
        if len(cmd) > 1 and cmd[1].endswith(f"{engine}.yaml".encode()) and os.readlink(f"/proc/{pid}/cwd") == str(state / product):
            return pid
    return None


def listening(port):
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


async def main():
    controller, cbf_run, data = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2]), pathlib.Path(sys.argv[3])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cbf-controller-test-"))
    (tmp / "controller.yaml").write_text(
        f"controller:\n  cbf_run: {cbf_run}\n  state_dir: state\n  start_timeout: {DEADLINE}\n"
        "ranges:\n  multicast: 239.53.0.0/24\n  udp_ports: 9500-9599\n  engine_katcp: 9600-9699\n"
        "  product_katcp: 9810-9819\nrestart:\n  initial: 0.05\n  max: 1\n  reset_after: 60\n")
    state = tmp / "state"
    config = (data / "suite-4ant-wide-beams.json").read_text()
    proc = subprocess.Popen([controller, "--config", str(tmp / "controller.yaml"), "--port", "0"],
                            stdout=subprocess.PIPE, text=True)
    try:
        line = await asyncio.wait_for(asyncio.to_thread(proc.stdout.readline), DEADLINE)
        check(line.startswith("cbf-controller: master controller on 127.0.0.1:"), f"first line {line!r}")
        master_port = int(line.rsplit(":", 1)[1])
        await session(master_port, config, state)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        rc = await asyncio.to_thread(proc.wait, DEADLINE)
    check(rc == 0, f"cbf-controller exited {rc}")
    check(not processes_in(tmp), f"engines left after the controller stopped: {processes_in(tmp)}")
    print("ok: cbf-controller stopped, nothing left")


def value(watcher, name):
    """A sensor's value as katcp writes it, None while it is not there."""
    sensor = watcher.sensors.get(name)
    return text(sensor.value) if sensor is not None else None


async def per_engine_sensors(product, watcher):
    """The engines' sensors under the product's stream names, as
    katsdpcontroller's generator renames them: feng1 carries m801h and m801v
    (its input0 and input1), xeng0 the first quarter of the channels."""
    s = watcher.sensors
    await product.request("gain", ACV, "m801v", "0.25-0.5j")
    await until(lambda: value(watcher, f"{ACV}.m801v.eq") == "[0.25-0.5j]", f"{ACV}.m801v.eq shows the gain")
    check(value(watcher, f"f.{ACV}.1.post.input1.eq") == "[0.25-0.5j]", "feng1's own input1.eq the same")
    check(s[f"{ACV}.m801v.feng-clip-cnt"].stype is int and s[f"{ACV}.m800h.dig-rms-dbfs"].stype is float,
          "the engines' types")
    models = ["0,0:0,0"] * 8
    models[3] = "2e-09,0:0.5,0"
    # the engines' clock runs at clock_ratio (0.001) of the wall's: load the
    # model a little after the data feng1 has received
    start = s[f"f.{ACV}.1.rx.unixtime"].value + 0.002
    await product.request("delays", ACV, repr(start), *models)
    await until(lambda: ", 2e-09, 0.0, 0.5, 0.0)" in (value(watcher, f"{ACV}.m801v.delay") or ""),
                f"{ACV}.m801v.delay shows the model in force")
    check(value(watcher, f"{ACV}.m801h.delay").endswith(", 0.0, 0.0, 0.0, 0.0)"), "m801h's delay stays zero")
    check(value(watcher, f"{BCP}.0.chan-range") == "(0,255)" and value(watcher, f"{BCP}.3.chan-range") == "(768,1023)",
          f"{BCP}.N.chan-range: {value(watcher, f'{BCP}.0.chan-range')}")
    check(value(watcher, f"{BEAM0}.1.chan-range") == value(watcher, f"xb.{BCP}.1.beam0.chan-range") == "(256,511)",
          f"{BEAM0}.1.chan-range is the engine's beam0.chan-range, its own channels: "
          f"{value(watcher, f'{BEAM0}.1.chan-range')}")
    check(s[f"{BEAM0}.2.tx.next-timestamp"].stype is int and s[f"{BCP}.2.rx.timestamp"].stype is int,
          "the engines' senders and receivers")

    def summed(agg, each):
        engines = [s.get(f"xb.{BCP}.{i}.{each}") for i in range(4)]
        return (agg in s and all(e is not None and e.status.valid_value() for e in engines) and
                s[agg].status == aiokatcp.Sensor.Status.NOMINAL and s[agg].value == sum(e.value for e in engines))
    await until(lambda: summed(f"{BCP}.xeng-clip-cnt", "reduce.xeng-clip-cnt"),
                f"{BCP}.xeng-clip-cnt the sum of the engines' reduce.xeng-clip-cnt")
    await until(lambda: summed(f"{BEAM0}.beng-clip-cnt", "beam0.beng-clip-cnt"),
                f"{BEAM0}.beng-clip-cnt the sum of the engines' beam0.beng-clip-cnt")
    check(s[f"{BCP}.rx.synchronised"].stype is bool and s[f"{BEAM0}.quantiser-gain"].stype is float,
          "the aggregates' types")
    print(f"ok: per-engine sensors under the stream names ({ACV}.m801v.eq, .delay, {BCP}.0.chan-range, "
          f"{BCP}.xeng-clip-cnt summed)")


async def session(master_port, config, state):
    # ---- the master controller ----
    master = await aiokatcp.Client.connect("127.0.0.1", master_port)
    bad = json.loads(config)
    bad["outputs"][ACV]["n_chans"] = 30000
    await refused(master, "product-configure", "p", json.dumps(bad),
                  want=f"outputs.{ACV}.n_chans: 30000 is not a power of two")
    await refused(master, "product-configure", "../p", config, want="argument 1")
    reply, _ = await master.request("product-configure-versions")
    check(int(reply[0]) == 10, "ten schema versions")

    reply, _ = await master.request("product-configure", "p", config)
    name, host, port = reply[0].decode(), reply[1].decode(), int(reply[2])
    check(name == "p" and host == "127.0.0.1", f"configure replied {reply}")
    print(f"ok: ?product-configure p -> {name} {host} {port}")
    await refused(master, "product-configure", "p", config, want="product 'p' already exists")
    _, informs = await master.request("product-list")
    check([i.arguments[0] for i in informs] == [b"p"], "product-list lists p")
    check(informs[0].arguments[1].startswith(b"idle, started at 20"), f"{informs[0].arguments[1]}")
    _, informs = await master.request("sensor-value", "p.katcp-address")
    check(informs[0].arguments[4] == f"127.0.0.1:{port}".encode(), "p.katcp-address")

    # ---- the product controller's sensors, as the suite reads them ----
    product = await aiokatcp.Client.connect(host, port)
    watcher = aiokatcp.SensorWatcher(product)
    product.add_sensor_watcher(watcher)
    await asyncio.wait_for(watcher.synced.wait(), DEADLINE)
    s = watcher.sensors
    check(s[f"{ACV}.n-chans"].value == 1024 and s[f"{ACV}.n-chans"].stype is int, "n-chans an int")
    check(s[f"{ACV}.bandwidth"].value == 856e6 and s[f"{ACV}.bandwidth"].stype is float, "bandwidth")
    check(text(s[f"{ACV}.input-data-suspect"].value) == "00000000", "nothing suspect")
    check(s[f"{BCP}.n-bls"].value == 40, "n-bls")
    dest = text(s[f"{BCP}.destination"].value)
    check(dest.startswith("239.53.0.") and "+3:" in dest, f"{BCP}.destination {dest}")
    tasks = json.loads(text(s[f"{BCP}.tasks"].value))
    check(tasks == [f"xb.{BCP}.{i}" for i in range(4)], f"{BCP}.tasks {tasks}")
    check(text(s[f"f.{ACV}.1.state"].value) == "up" and text(s["device-status"].value) == "ok", "all up")
    check(s["sim.dsim000.1712000000.0.port"].value is not None, "the dsim's port, as the suite finds dsims")
    print(f"ok: {len(s)} sensors decoded by SensorWatcher; {BCP}.destination {dest}")
    # the engines' own sensors are there once configure has replied: the
    # suite syncs once and keeps what it got (its init_sensors)
    for name in (f"f.{ACV}.0.pfb.steady-state-timestamp", "sim.dsim000.1712000000.0.max-period",
                 f"{ACV}.m800h.eq"):
        check(name in s, f"{name} among the sensors synced right after configure")

    # ---- product requests ----
    # What took effect and when is there as the reply comes (the suite reads
    # steady-state-timestamp right after a request), not a mirror period later.
    post_steady = f"f.{ACV}.0.post.steady-state-timestamp"
    await until(lambda: post_steady in watcher.sensors, "post's steady-state-timestamp mirrored")
    # a change "at the next spectrum" has a timestamp once feng0's post has
    # processed data (before, the next one to process is 0)
    await until(lambda: int(value(watcher, f"f.{ACV}.0.post.buffers-in") or 0) > 0, "feng0's post has data")

    async def read_steady():
        _, informs = await product.request("sensor-value", post_steady)
        return int(informs[0].arguments[4])
    before = await read_steady()
    await product.request("gain", ACV, "m800h", "0.5+0.25j")
    after = await read_steady()
    check(after > before, f"{post_steady} read right after ?gain: {after}, was {before}")
    eq = f"f.{ACV}.0.post.input0.eq"
    await until(lambda: eq in watcher.sensors and text(watcher.sensors[eq].value) == "[0.5+0.25j]",
                f"{eq} shows the new gain once it is in force")
    reply, _ = await product.request("gain", ACV, "m800h")
    check(reply == [b"0.5+0.25j"], f"gain read back {reply}")
    await per_engine_sensors(product, watcher)
    await product.request("gain-all", ACV, "default")
    await product.request("beam-weights", BEAM0, "0.5", "0.25", "0.125", "1")
    weight = f"xb.{BCP}.0.corr.beam0.weight"
    await until(lambda: weight in watcher.sensors and text(watcher.sensors[weight].value) == "[0.5, 0.25, 0.125, 1.0]",
                f"{weight} shows the new weights")
    await until(lambda: value(watcher, f"{BEAM0}.weight") == "[0.5, 0.25, 0.125, 1.0]",
                f"{BEAM0}.weight, the latest of the engines' beam0.weight, shows them")
    await product.request("capture-start", BCP)
    await until(lambda: text(watcher.sensors["product-state"].value) == "capturing", "capturing")
    await product.request("capture-stop", BCP)
    await until(lambda: text(watcher.sensors["product-state"].value) == "idle", "idle")
    dsim = "sim.dsim000.1712000000.0"
    reply, _ = await product.request("dsim-signals", dsim, "common=wgn(0.1); common; common;")
    check(len(reply) == 1 and int(reply[0]) > 0, f"?dsim-signals: the first timestamp of the signal {reply}")
    # the dsim's clock runs at clock_ratio of the wall's, from the wall's time
    # at its start: behind the wall, ahead of what feng0 had received
    received = watcher.sensors[f"f.{ACV}.0.rx.unixtime"].value
    before = time.time()
    reply, _ = await product.request("dsim-time", dsim)
    check(len(reply) == 1 and received <= float(reply[0]) <= before,
          f"?dsim-time: the dsim's clock {reply}, not between feng0's rx.unixtime {received} and the wall's {before}")
    await refused(product, "dsim-signals", dsim, "cw(1, foo);cw(1, 2);", want="column 7")
    print("ok: gain, gain-all, delays, beam-weights (mirrored weight sensor), capture-start/stop, dsim-signals")
    await refused(product, "gain", ACV, "m900h", "1", want="argument 2: Unknown input 'm900h'")
    await refused(product, "delays", ACV, "0", "0,0:0,0", want="Wrong number of coefficient sets")
    await refused(product, "capture-start", ACV, want="argument 1: stream")
    await refused(product, "beam-weights", BEAM0, "1", want="Expected 4 values, received 1")

    # ---- a second product beside it ----
    reply, _ = await master.request("product-configure", "p*", config)
    check(reply[0] == b"p1" and int(reply[2]) != port, f"second product {reply}")
    second = await aiokatcp.Client.connect(reply[1].decode(), int(reply[2]))
    _, informs = await second.request("sensor-value", f"{BCP}.destination")
    dest2 = informs[0].arguments[4].decode()
    check(dest2 != dest and dest2.startswith("239.53.0."), f"its own groups: {dest2} beside {dest}")
    print(f"ok: second product p1 on port {int(reply[2])}, {BCP}.destination {dest2}")

    # ---- an F-engine killed: its state and exactly its inputs flagged ----
    history = {"state": [], "suspect": [], "mirrored": []}
    watcher.sensors[f"f.{ACV}.1.state"].attach(lambda _s, r: history["state"].append(text(r.value)))
    watcher.sensors[f"{ACV}.input-data-suspect"].attach(lambda _s, r: history["suspect"].append(text(r.value)))
    watcher.sensors[f"f.{ACV}.1.pfb.steady-state-timestamp"].attach(
        lambda _s, r: history["mirrored"].append(r.status))
    history["renamed"] = []
    watcher.sensors[f"{ACV}.m801v.eq"].attach(lambda _s, r: history["renamed"].append(r.status))
    pid = engine_pid(state, "p", "feng1")
    check(pid, "feng1's process")
    os.kill(pid, signal.SIGKILL)
    await until(lambda: "00110000" in history["suspect"] and history["suspect"][-1] == "00000000" and
                history["state"][-1] == "up" and "down" in history["state"], "feng1 down and up again")
    check(set(history["suspect"]) == {"00110000", "00000000"}, f"suspect masks {history['suspect']}")
    check(aiokatcp.Sensor.Status.UNREACHABLE in history["mirrored"], "mirrored sensors unreachable while down")
    check(aiokatcp.Sensor.Status.UNREACHABLE in history["renamed"], f"{ACV}.m801v.eq unreachable while down")
    print(f"ok: feng1 killed: states {history['state']}, input-data-suspect {history['suspect']}")
    second.close()
    product.close()

    # ---- deconfigure: nothing left ----
    engine_ports = [9600 + k for k in range(24)]
    await master.request("product-deconfigure", "p1")
    await master.request("product-deconfigure", "p", "1")
    check(not any(listening(p) for p in engine_ports + [port, port + 1]), "a port still listens")
    check(not processes_in(state), f"engines left: {processes_in(state)}")
    _, informs = await master.request("sensor-value", "products")
    check(informs[0].arguments[4] == b"[]", f"products {informs[0].arguments[4]}")
    await refused(master, "product-deconfigure", "p", want="no product named 'p'")
    print("ok: both deconfigured, no engine or port left")
    master.close()


if __name__ == "__main__":
    asyncio.run(main())
