#!/usr/bin/env python3
"""The array as separate processes over loopback multicast: 1 digitiser
process (4 antennas, a group per polarisation), 4 F-engines, 2 X-engines of
512 channels each, all cbf-run, wired by pipelines/array-*.yaml. The
visibilities of each X-engine must equal the matching channels of the
single-process array (pipelines/demo.yaml with the same parameters), and no
antenna may be flagged.

usage: array.py CBF_RUN
"""
import os
import subprocess
import sys
import tempfile
import time

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy not importable ({e})")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
PIPE = os.path.join(ROOT, "pipelines")
LENGTH = 8388608
DUMP = 4


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def bound_ports():
    with open("/proc/net/udp") as f:
        return {int(line.split()[1].split(":")[1], 16) for line in f.readlines()[1:]}


def wait_bound(ports, procs):
    deadline = time.monotonic() + 60
    while not set(ports) <= bound_ports():
        for p in procs:
            if p.poll() is not None:
                fail(f"an engine exited early: {p.communicate()[0]}")
        if time.monotonic() > deadline:
            fail(f"ports {ports} never bound")
        time.sleep(0.01)


def start(cbf_run, yaml_name, sets, log):
    args = [cbf_run, os.path.join(PIPE, yaml_name)]
    for s in sets:
        args += ["--set", s]
    return subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, text=True)


def main():
    cbf_run = sys.argv[1]
    # Distinct group ports per run so parallel test runs cannot cross.
    base = 20000 + (os.getpid() % 2000) * 16
    dig = [f"239.10.1.{i}:{base + i}" for i in range(8)]
    xg = [f"239.10.2.{x}:{base + 8 + x}" for x in range(2)]
    with tempfile.TemporaryDirectory() as tmp:
        logs, procs = [], []

        def spawn(name, yaml_name, sets):
            log = open(os.path.join(tmp, name + ".log"), "w+")
            logs.append((name, log))
            p = start(cbf_run, yaml_name, sets, log)
            procs.append(p)
            return p

        for x in range(2):
            spawn(f"xeng{x}", "array-xeng.yaml",
                  [f"recv.address={xg[x]}", f"recv.first_channel={512 * x}", "recv.idle_timeout=60",
                   f"corr.heap_accumulation_threshold={DUMP}", "recv.stops=4",
                   f"sink.path={tmp}/xeng{x}.h5"])
        wait_bound([base + 8, base + 9], procs)
        for a in range(4):
            spawn(f"feng{a}", "array-feng.yaml",
                  [f"recv.address={dig[2 * a]},{dig[2 * a + 1]}", f"post.feng_id={a}", f"send.feng_id={a}",
                   f"send.destinations={xg[0]},{xg[1]}", "recv.idle_timeout=60"])
        wait_bound(range(base, base + 8), procs)
        tx = spawn("digitiser", "array-digitiser.yaml",
                   [f"send.destinations={','.join(dig)}", f"dsim.length={LENGTH}"])
        for p in procs:
            try:
                p.wait(timeout=240)
            except subprocess.TimeoutExpired:
                for q in procs:
                    q.kill()
                fail("the array did not finish in 240 s")
        for (name, log), p in zip(logs, procs):
            if p.returncode:
                log.seek(0)
                fail(f"{name} exited {p.returncode}: {log.read()[-3000:]}")
        ref_path = os.path.join(tmp, "ref.h5")
        subprocess.run([cbf_run, os.path.join(PIPE, "demo.yaml"), "--quiet", "--set", f"dsim.length={LENGTH}",
                        "--set", f"corr.heap_accumulation_threshold={DUMP}", "--set", f"sink.path={ref_path}"],
                       check=True, timeout=240)
        ref = h5py.File(ref_path)["reduce"]
        ref_vis, ref_ts = ref["data"][()], ref["timestamp"][()]    # [dump][channel][bl x 4][2]
        for x in range(2):
            got = h5py.File(os.path.join(tmp, f"xeng{x}.h5"))["reduce"]
            vis, ts = got["data"][()], got["timestamp"][()]
            if len(ts) == 0 or not np.array_equal(ts, ref_ts):
                fail(f"X-engine {x}: dump timestamps {ts} != {ref_ts}")
            if not got["present"][()].all():
                fail(f"X-engine {x}: flagged antennas {np.argwhere(got['present'][()] == 0)}")
            if not np.array_equal(vis, ref_vis[:, 512 * x:512 * (x + 1)]):
                fail(f"X-engine {x}: visibilities differ from the single-process array")
        print(f"ok: 4 F-engines and 2 X-engines in 7 processes: {len(ref_ts)} dumps x 1024 channels "
              f"identical to the single-process array")
    return 0


if __name__ == "__main__":
    sys.exit(main())
