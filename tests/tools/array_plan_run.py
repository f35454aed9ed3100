#!/usr/bin/env python3
"""A plan written by cbf-array runs as it is: 4 antennas, 2 X-engines of
512 channels with 2 beams each, a beam receiver and a simulated digitiser,
all on one host (127.0.0.1, the CPU), each process `cbf-run FILE` in the
plan's folder in processes.tsv's order. The visibilities of each X-engine
must equal the matching channels of the single-process XB-engine
(pipelines/xbeng.yaml, the array's reference in tests/net/array.py) on the
same digitiser signal, no antenna flagged, and the recorded beams must
equal that XB-engine's with the plan's beams (pols 0 and 1, weights 1/4,
no delays), bit for bit: the generated files carry what
pipelines/array-*.yaml and scripts/cbf_array.py's overrides do.

usage: array_plan_run.py CBF_ARRAY CBF_RUN
"""
import contextlib
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy not importable ({e})")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(ROOT, "scripts"))
from cbf_array import ArrayError, wait_bound  # noqa: E402

LENGTH, DUMP = 8388608, 4

DESCRIPTION = """\
array:
  name: loop4
  antennas: 4
  channels: 1024
  xengines: 2
  beams: 2
  heaps_per_dump: {dump}
  gain: 0.04
multicast:
  digitiser: 239.10.{net}.0:{port}
  feng: 239.10.{net}.16:{port2}
  beam: 239.10.{net}.32:{port3}
simulate:
  digitisers: 1
  length: {length}
  noise: 0.02
  tone_hz: 250781250
  tone_amplitude: 0.2
  delay_step: 1.25
  rate_gbps: 0.1
hosts:
  lo: {{roles: "digitiser, feng, xeng, beams", interfaces: 127.0.0.1, nic_gbps: 400}}
"""


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def _kill(p):
    if p.poll() is None:
        p.kill()
        p.wait()


def run_plan(cbf_run, plan):
    rows = [line.rstrip("\n").split("\t") for line in open(os.path.join(plan, "processes.tsv"))
            if not line.startswith("#")]
    procs = []
    # Every log is closed and every process still running is killed on the
    # way out, however the run ends (ExitStack undoes in reverse order).
    with contextlib.ExitStack() as stack:
        try:
            for i, (order, name, host, gpu, yaml, ports) in enumerate(rows):
                log = stack.enter_context(open(os.path.join(plan, name + ".log"), "w"))
                # not --quiet: a progress line every 5 s and the counter
                # table at exit (drops among them) go to the log, for a
                # failure to show
                p = subprocess.Popen([cbf_run, yaml], cwd=plan, stdout=log, stderr=subprocess.STDOUT)
                stack.callback(_kill, p)
                procs.append((name, p, log))
                # Start the next stage only once this one's sockets are bound.
                if i + 1 == len(rows) or rows[i + 1][0] != order:
                    want = [int(x) for r in rows if r[0] == order and r[5] != "-" for x in r[5].split(",")]
                    wait_bound(want, procs)
            for name, p, _ in procs:
                # about 11 s when well; a process still waiting after two
                # minutes is stuck, and the logs of all that still run say where
                if p.wait(timeout=120):
                    fail(f"{name} exited {p.returncode}: {open(os.path.join(plan, name + '.log')).read()[-2000:]}")
        except subprocess.TimeoutExpired as e:
            stuck = [(n, open(os.path.join(plan, n + ".log")).read()[-1000:])
                     for n, q, _ in procs if q.poll() is None]
            fail(f"the plan did not finish ({e}); still running: " +
                 "; ".join(f"{n}: {tail!r}" for n, tail in stuck))
        except ArrayError as e:
            fail(f"the plan did not run: {e}")
    return [r[1] for r in rows]


def main():
    cbf_array, cbf_run = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    base = 30000 + (os.getpid() % 1000) * 24   # apart from tests/net/array.py's 20000-52000 steps of 16
    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "loop4.yaml")
        with open(desc, "w") as f:
            f.write(DESCRIPTION.format(dump=DUMP, length=LENGTH, net=100 + os.getpid() % 100, port=base,
                                       port2=base + 16, port3=base + 20))
        plan = os.path.join(tmp, "plan")
        r = subprocess.run([cbf_array, desc, "--out", plan], capture_output=True, text=True)
        if r.returncode:
            fail(f"cbf-array exit {r.returncode}: {r.stdout}{r.stderr}")
        # the engines' senders paced at 8x their share of the simulated
        # digitiser's 0.1 Gb/s: an F-engine 8 x 0.1 / 4 antennas, an
        # X-engine's 2 beams 8 x 0.025 x 4 x 2 / (10 bits x 2 X-engines)
        for name, want in (("feng0", "rate_gbps: 0.2\n"), ("xeng1", "rate_gbps: 0.08\n")):
            if want not in open(os.path.join(plan, name + ".yaml")).read():
                fail(f"{name}.yaml: no '{want.strip()}' (its sender unpaced)")
        names = run_plan(cbf_run, plan)
        if names != ["beams", "xeng0", "xeng1", "feng0", "feng1", "feng2", "feng3", "digitiser0"]:
            fail(f"processes.tsv lists {names}")
        ref_path = os.path.join(tmp, "ref.h5")
        subprocess.run([cbf_run, os.path.join(ROOT, "pipelines", "xbeng.yaml"), "--quiet",
                        "--set", f"dsim.length={LENGTH}", "--set", f"corr.heap_accumulation_threshold={DUMP}",
                        "--set", "beams.beams=[{pol: 0}, {pol: 1}]", "--set", "beams.delays=[]",
                        "--set", "beams.fringe_offsets=[]", "--set", f"sink.path={ref_path}"],
                       check=True, timeout=400)
        ref_file = h5py.File(ref_path)
        ref_vis, ref_ts = ref_file["reduce"]["data"][()], ref_file["reduce"]["timestamp"][()]
        for x in range(2):
            got = h5py.File(os.path.join(plan, f"xeng{x}.h5"))["reduce"]
            if len(ref_ts) == 0 or not np.array_equal(got["timestamp"][()], ref_ts):
                fail(f"X-engine {x}: dump timestamps {got['timestamp'][()]} != {ref_ts}")
            if not got["present"][()].all():
                fail(f"X-engine {x}: flagged antennas {np.argwhere(got['present'][()] == 0)}")
            if not np.array_equal(got["data"][()], ref_vis[:, 512 * x:512 * (x + 1)]):
                fail(f"X-engine {x}: visibilities differ from the single-process XB-engine")
        beams = h5py.File(os.path.join(plan, "beams.h5"))["recv"]
        ref_b = ref_file["beams"]
        got_b = np.concatenate(list(beams["data"][()]))      # [batch][beam][channel][spectrum][2]
        want_b = np.concatenate(list(ref_b["data"][()]))
        if not beams["present"][()].all() or got_b.shape != want_b.shape or not np.array_equal(got_b, want_b):
            where = ""
            if got_b.shape == want_b.shape:
                diff = (got_b != want_b).any(axis=-1)          # [batch][beam][channel][spectrum]
                zero = (got_b == 0).all(axis=-1) & diff
                where = (f"; {diff.sum()} values differ ({zero.sum()} of them zero in the recording), "
                         f"batches {sorted(set(np.argwhere(diff)[:, 0].tolist()))}, "
                         f"channels {np.argwhere(diff.any(axis=(0, 1, 3))).ravel()[[0, -1]].tolist()}")
            logs = "; ".join(f"{n}: {open(os.path.join(plan, n + '.log')).read()[-1500:]!r}"
                             for n in ("beams", "xeng0", "xeng1"))
            fail(f"beams: {got_b.shape} recorded, {want_b.shape} in the single-process run, "
                 f"equal: {got_b.shape == want_b.shape and np.array_equal(got_b, want_b)}{where}; logs: {logs}")
        print(f"ok: the 8-process plan cbf-array wrote ran as written; {len(ref_ts)} dumps x 1024 channels "
              f"and {got_b.shape[0]} batches x 2 beams identical to the single-process XB-engine")
    return 0


if __name__ == "__main__":
    sys.exit(main())
