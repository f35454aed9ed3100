"""cbf-controller's one command (docs/controller.md, "One command"):
`cbf-controller --configure NAME pipelines/products/wideband-4ant.json
--capture` configures the shipped 4-antenna product (katgpucbf's
qualification suite's form, at a clock ratio a 2-core CPU keeps up with),
starts every correlator and beam stream, and the data leaves: each beam
sender's heaps and the correlator's visibility heaps climb (read from the
product controller's mirrored sensors with aiokatcp); SIGTERM then
deconfigures it, exit 0, no engine left running.

usage: test_startup.py CBF_CONTROLLER PRODUCT_JSON"""
import asyncio
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import tempfile
import time

try:
    import aiokatcp
except ImportError:
    print("SKIP: aiokatcp is not installed (scripts/setup.sh installs it)")
    sys.exit(77)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from test_controller import processes_in  # noqa: E402

DEADLINE = 120   # seconds for each step on a loaded 2-core machine


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok:", msg)


def read_line(proc, pattern, deadline):
    """The first line of the controller's output matching pattern."""
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            fail(f"cbf-controller ended before printing {pattern!r} (exit {proc.wait()}): {proc.stderr.read()}")
        m = re.search(pattern, line)
        if m:
            return m
    fail(f"no {pattern!r} within the deadline")


async def heaps(product, pattern):
    _, informs = await product.request("sensor-value", pattern)
    return {i.arguments[2].decode(): int(i.arguments[4]) for i in informs}


async def data_leaves(address, n_beams):
    host, port = address.rsplit(":", 1)
    product = await aiokatcp.Client.connect(host, int(port))
    try:
        deadline = time.monotonic() + DEADLINE
        first = None
        while time.monotonic() < deadline:
            b = await heaps(product, r"/^xb\..*\.bsend\.heaps$/")
            v = await heaps(product, r"/^xb\..*\.vsend\.heaps$/")
            # The mirror adds an engine's sensors once it has read them: the
            # first look is the one that has all four engines' of each.
            if first is None and len(b) == 4 and len(v) == 4:
                first = (b, v)
            if first and all(b[k] > first[0][k] for k in first[0]) and all(v[k] > first[1][k] for k in first[1]):
                check(set(b) == set(first[0]) and set(v) == set(first[1]),
                      f"4 X/B-engines send beams and visibilities: {b} {v}")
                return
            await asyncio.sleep(0.5)
        fail(f"heaps did not climb on every engine: first {first}, last {b} {v}")
    finally:
        product.close()
        await product.wait_closed()


def main():
    controller, product_json = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    n_beams = sum(1 for s in json.load(open(product_json))["outputs"].values()
                  if s["type"] == "gpucbf.tied_array_channelised_voltage")
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="cbf-startup-test-"))
    # No --config: every default, engines found beside cbf-controller, the
    # state folder in the working folder, as a newcomer runs it.
    proc = subprocess.Popen([controller, "--port", "0", "--configure", "demo", product_json, "--capture"],
                            cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + DEADLINE
        read_line(proc, r"master controller on ", deadline)
        m = read_line(proc, r"product demo configured; its product controller on (\S+)", deadline)
        started = [read_line(proc, r"capture-start (\S+)", deadline).group(1) for _ in range(1 + n_beams)]
        check(started[0] == "baseline-correlation-products" and len(started) == 1 + n_beams,
              f"capture-start on the correlator and {n_beams} beams: {started}")
        asyncio.run(data_leaves(m.group(1), n_beams))
        proc.send_signal(signal.SIGTERM)
        rc = proc.wait(timeout=DEADLINE)
        check(rc == 0, f"SIGTERM: exit {rc}")
        left = processes_in(tmp)
        check(not left, f"no engine left running in {tmp}: {left}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


if __name__ == "__main__":
    main()
