"""Beam requests at timestamps inside heaps on a running cbf-run, read back
from HDF5: the data path of the engine (CPU, and with --gpu the CUDA
kernel with its per-change coefficient upload), not the harness's.

fsim feeds the beamformer for 120 buffers of two heaps; right after the
start (the control socket is up before data flows) changes are sent for
buffers 80 to 100 (seconds of data ahead on this machine), of each kind, between two spectra and inside a second
heap. A run without them is the baseline: each beam's bytes must equal the
baseline's up to the spectrum its first change names and differ from
there on (the first differing spectrum is the change's, exactly). With
--gpu the same requests on `gpu: required` must give the CPU run's bytes
exactly (exit 77 without a GPU). With --deferred the CPU runs hold each
output back until the next buffer is queued (CBF_FLIGHT_DEFER=1,
plugins/stage/flight.h), as the GPU path does when the GPU is behind: the
changes must stay exact to the spectrum with a buffer in flight, and the
last buffer must still reach the file. With --xb the node is the
xbengine plugin (correlation beside the beams; on the GPU `fuse: on`, so
on a Hopper GPU the one kernel runs and a change inside a piece splits it
into the two kernels) and the same must hold. test_beam_control.c holds
the values to the float64 reference. On the GPU the node's gpu_ms_per_buffer
gauge must show in cbf-run's table at exit.

usage: test_beam_timing.py [--gpu | --deferred] [--xb] (CBF_BUILD_ROOT in the environment)"""
import os
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "control"))
from ctl_util import CBF_RUN, Engine, check, fail  # noqa: E402

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"SKIP: h5py/numpy not importable ({e})")
    sys.exit(77)

A, C, T, NB, BUFS = 8, 64, 128, 2, 120
SBS = 2 * C
BUF = NB * T * SBS

YAML = """
engine:
  gpu: %s
  control: tcp://127.0.0.1:*
nodes:
  fsim:
    plugin: fsim
    params: {antennas: %d, channels: %d, spectra_per_heap: %d, batches: %d, length: %d,
             missing_antennas: [3], missing_batches: [161, 170]}
  beam:
    plugin: %s
    params:
      beams: [{pol: 0}, {pol: 1, quant_gain: 0.5}, {pol: 0, quant_gain: 0.25}]
      names: "a, b, c"
      delays: [0, 1e-9, 2e-9, 3e-9, -1e-9, -2e-9, 0.5e-9, 0]
      dither_key: 9%s
  sink: {plugin: filesink, params: {path: %s, overwrite: true}}
%s
edges:
  - fsim.out -> beam.in
  - beam.%s -> sink.in
%s
"""
XB = "--xb" in sys.argv[1:]
# the xbengine's dumps go to a discard node; its beams to the file
NODE = ("xbengine", "\n      fuse: \"on\"\n      heap_accumulation_threshold: 3",
        "  dumps: {plugin: discard}", "beams", "  - beam.out -> dumps.in") if XB else \
       ("beamformer", "", "", "out", "")


def ts(k, i):
    """Timestamp of spectrum i (counted across heaps) of buffer k."""
    return k * BUF + i * SBS


# (request, beam index, arguments, timestamp)
CHANGES = [
    ("beam-weights", 0, {"weights": [0.5, -1, 2, 0.25, 1, 1, -0.5, 0.75]}, ts(80, 13) + 5),
    ("beam-delays", 1, {"delays": [v for a in range(A) for v in (a * 2e-10, 0.3 * a)]}, ts(85, T + 7)),
    ("beam-quant-gains", 2, {"gain": 1.75}, ts(85, 20)),
    ("beam-weights", 0, {"weights": [1] * A}, ts(100, T + 41)),
]


def run(tmp, gpu, requests):
    path = os.path.join(tmp, "beams-%s-%d.h5" % (gpu, requests))
    plugin, extra, sinks, port, edge = NODE
    e = Engine(YAML % (gpu, A, C, T, NB, BUFS * NB, plugin, extra, path, sinks, port, edge),
               os.path.join(tmp, "engine.yaml"), stdout=subprocess.PIPE)
    try:
        for name, b, args, at in CHANGES if requests else []:
            rc, reply, err = e.request(dict({"request": name, "node": "beam", "beam": "abc"[b], "at": at}, **args))
            if rc or not reply.get("ok"):
                fail("%s for beam %s at %d: %s%s (had the data already passed it? the requests "
                     "must reach the engine before buffer 80)" % (name, "abc"[b], at, err, reply))
        table = e.proc.stdout.read()                 # cbf-run's counters, at its end
        code = e.proc.wait(timeout=300)
    finally:
        e.kill()
    if code:
        fail("cbf-run (gpu: %s) exited %d:\n%s" % (gpu, code, "".join(e.log[-20:])))
    if gpu != "none":
        # the node's GPU time per buffer, last value, in cbf-run's table
        line = next((l for l in table.splitlines() if l.startswith("beam ")), "")
        m = re.search(r" gpu_ms_per_buffer=(\S+)", line)
        check(m is not None and 0 < float(m.group(1)) < 1e4,
              "the %s's gpu_ms_per_buffer gauge is a time (%s)" % (NODE[0], line or table))
    if XB and gpu != "none" and hopper():
        m = re.search(r"one_kernel_pieces=(\d+)", table)
        check(m is not None and int(m.group(1)) > 0,
              "the xbengine ran the one kernel on this Hopper GPU (%s)" % (m.group(0) if m else table))
    with h5py.File(path) as f:
        d = f["beam"]["data"][()]                      # [buf][batch][beam][channel][spectrum][2]
        stamps = f["beam"]["timestamp"][()]
    os.unlink(path)
    check(d.shape == (BUFS, NB, 3, C, T, 2) and list(stamps) == [ts(k, 0) for k in range(BUFS)],
          "gpu %s, requests %d: %d buffers of beams" % (gpu, requests, BUFS))
    return d


def hopper():
    """Whether the GPU is compute capability 9.x, where `fuse: on` must run the one kernel."""
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
                           capture_output=True, text=True)
    except OSError:
        return False
    return r.returncode == 0 and r.stdout.strip().startswith("9.")


def per_spectrum(d):
    """[beam][spectrum counted from the first][channel x re/im]."""
    return d.transpose(2, 0, 1, 4, 3, 5).reshape(3, BUFS * NB * T, C * 2)


def gpu_usable(tmp):
    """A two-buffer run with gpu: required: False when no GPU is usable."""
    path = os.path.join(tmp, "probe.yaml")
    with open(path, "w") as f:
        f.write("engine: {gpu: required}\nnodes:\n  fsim: {plugin: fsim, params: {length: 2, batches: 1}}\n"
                "  beam: {plugin: beamformer}\n  sink: {plugin: discard}\n"
                "edges:\n  - fsim.out -> beam.in\n  - beam.out -> sink.in\n")
    r = subprocess.run([CBF_RUN, path, "--quiet"], capture_output=True, text=True, timeout=120)
    if r.returncode and "no GPU is usable" in r.stderr:
        return False
    if r.returncode:
        fail("the GPU probe run failed: " + r.stderr)
    return True


def main():
    gpu = "--gpu" in sys.argv[1:]
    if "--deferred" in sys.argv[1:]:
        os.environ["CBF_FLIGHT_DEFER"] = "1"
    tmp = tempfile.mkdtemp(prefix="cbf-beam-timing-")
    if gpu and not gpu_usable(tmp):
        print("SKIP: no usable GPU")
        sys.exit(77)
    base = per_spectrum(run(tmp, "none", False))
    cpu = run(tmp, "none", True)
    with_req = per_spectrum(cpu)
    for b in range(3):
        at = min(at for _, bb, _, at in CHANGES if bb == b)
        first = -(-at // SBS)                          # the first spectrum at or after at
        diff = np.nonzero((with_req[b] != base[b]).any(axis=1))[0]
        check(len(diff) > 0 and diff[0] == first,
              "beam %s: equal to the run without requests up to spectrum %d (timestamp %d), "
              "different from there (first difference at %s)" % ("abc"[b], first, at,
                                                                 diff[0] if len(diff) else None))
    if gpu:
        g = run(tmp, "required", True)
        check(np.array_equal(g, cpu), "gpu: the beams with the requests equal the CPU's byte for byte")
    print("PASS")


if __name__ == "__main__":
    main()
