"""cbf-controller's product across hosts: the master controller and its
client on one host, the simulated digitisers, F-engines and X/B-engines
each on hosts of their own, every host a network namespace with its own
address on one IGMP-snooping bridge (scripts/cbf_netns.py), the hosts'
`netns` naming them in the controller's configuration so the local
launcher runs each engine there (ip netns exec):

- configure places each kind of engine on its host by role (TASK.host),
  and each engine process runs in its host's namespace;
- capture-start: the visibilities and beams of every X/B-engine leave, so
  digitiser, F-engine and X-engine data crossed the bridge;
- deconfigure leaves no engine in any namespace.

Skipped (77) where namespaces cannot be made (not root, no iproute2).

usage: test_netns.py CBF_CONTROLLER CBF_RUN PRODUCT_JSON (pipelines/products/wideband-4ant.json)"""
import asyncio
import json
import os
import pathlib
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
sys.path.insert(0, HERE)
import cbf_netns  # noqa: E402

HOSTS = ["mc", "dig", "feng", "xeng"]
ROLES = {"dig": "digitiser", "feng": "feng", "xeng": "xeng, beams"}
BCP = "baseline-correlation-products"


def session(port, state, netns_of):
    """Runs inside host mc: the client's half."""
    import aiokatcp
    from test_controller import DEADLINE, check, processes_in, until

    async def run():
        # the one command's product: a dump every 0.05 s of its time, 25 s
        # of the wall's at its clock ratio (0.002)
        config = json.loads(pathlib.Path(sys.argv[3]).read_text())
        master = await aiokatcp.Client.connect("127.0.0.1", port)
        reply, _ = await master.request("product-configure", "p", json.dumps(config))
        pc = await aiokatcp.Client.connect(reply[1].decode(), int(reply[2]))
        _, informs = await pc.request("sensor-value", r"/\.host$/")
        hosts = {i.arguments[2].decode()[:-5]: i.arguments[4].decode() for i in informs}
        want = {f"sim.dsim00{k}.1712000000.0": "dig" for k in range(4)}
        want.update({f"f.antenna-channelised-voltage.{k}": "feng" for k in range(4)})
        want.update({f"xb.{BCP}.{k}": "xeng" for k in range(4)})
        check(hosts == want, f"each engine on its role's host: {hosts}")
        # each engine process in its host's namespace
        procs = processes_in(state)
        check(len(procs) == 12, f"12 engines running: {len(procs)}")
        kinds = {"digitiser": "dig", "feng": "feng", "xeng": "xeng"}
        for pid, cmd in procs:   # cbf-run PIPELINE: ip netns exec'd it
            pipeline = os.path.basename(cmd[1].decode())
            host = next(h for k, h in kinds.items() if pipeline.startswith(k))
            r = subprocess.run(["ip", "netns", "identify", str(pid)], capture_output=True, text=True, timeout=20)
            check(r.stdout.strip() == netns_of[host], f"{pipeline} runs in {r.stdout.strip()!r}, "
                  f"host {host}'s namespace {netns_of[host]}")
        print("ok: 4 dsims, 4 F-engines, 4 X/B-engines, each on its host and in its namespace")
        await pc.request("capture-start", BCP)
        await pc.request("capture-start", "tied-array-channelised-voltage-0x")
        first = {}

        async def climbed():
            _, informs = await pc.request("sensor-value", r"/^xb\..*\.(vsend|bsend)\.heaps$/")
            now = {i.arguments[2].decode(): int(i.arguments[4]) for i in informs if i.arguments[3] == b"nominal"}
            if len(now) < 8:
                return False
            if not first:
                first.update(now)
                return False
            return all(now[k] > first[k] for k in first)
        await until(climbed, "visibilities and beams leave every X/B-engine", 2 * DEADLINE)
        print("ok: visibilities and beams from every X/B-engine: the data crossed the bridge")
        pc.close()
        await master.request("product-deconfigure", "p")
        check(not processes_in(state), f"engines left: {processes_in(state)}")
        print("ok: deconfigured, no engine left")
        master.close()
    asyncio.run(run())


def main():
    if len(sys.argv) > 4 and sys.argv[4] == "--session":
        session(int(sys.argv[5]), pathlib.Path(sys.argv[6]), json.loads(sys.argv[7]))
        return
    reason = cbf_netns.unavailable()
    if reason:
        print(f"SKIP: {reason}")
        sys.exit(77)
    cbf_netns.exit_on_signals()
    controller, cbf_run = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cbf-netns-test-"))
    with cbf_netns.Hosts(HOSTS) as net:
        lines = [f"controller:\n  cbf_run: {cbf_run}\n  state_dir: state\n  start_timeout: 60\n",
                 "ranges:\n  multicast: 239.55.0.0/24\n  udp_ports: 9940-9979\n  engine_katcp: 9980-9999\n"
                 "  product_katcp: 9830-9839\n", "hosts:\n"]
        for h, roles in ROLES.items():
            a = net.address(h)
            lines.append(f"  {h}: {{roles: \"{roles}\", interfaces: {a}, nic_gbps: 10, control: {a}, "
                         f"netns: {net.ns(h)}}}\n")
        (tmp / "controller.yaml").write_text("".join(lines))
        ctl = subprocess.Popen(net.wrap("mc", [controller, "--config", str(tmp / "controller.yaml"), "--port", "0"]),
                               stdout=subprocess.PIPE, text=True)
        try:
            line = ctl.stdout.readline()
            if not line.startswith("cbf-controller: master controller on 127.0.0.1:"):
                print(f"FAIL: first line {line!r}")
                sys.exit(1)
            port = line.rsplit(":", 1)[1].strip()
            netns_of = json.dumps({h: net.ns(h) for h in ROLES})
            rc = subprocess.run(net.wrap("mc", [sys.executable, __file__, *sys.argv[1:4], "--session", port,
                                                str(tmp / "state"), netns_of]), timeout=600).returncode
        finally:
            ctl.terminate()
            ctl.wait(timeout=60)
    if rc:
        print(f"FAIL: the session in host mc exited {rc}")
        sys.exit(1)
    print("ok: cbf-controller stopped")


if __name__ == "__main__":
    main()
