"""The whole array as separate cbf-run processes over loopback multicast,
wired by pipelines/array-*.yaml: 2 XB-engines of 512 channels each (each
also beamforms and sends 2 beams, a group per beam), the beam receiver
that records both engines' beams, 4 F-engines (one per antenna), and the
digitiser process (4 antennas, a group per polarisation). Receivers start
first, each stage only once the previous one's sockets are bound; every
wait is bounded.

Used by scripts/run-array (by hand) and tests/net/array.py (checked
against the single-process array)."""
import os
import subprocess
import time

ANTENNAS, XENGINES, CHANNELS_PER_X, BEAMS = 4, 2, 512, 2


def _bound_udp_ports():
    with open("/proc/net/udp") as f:
        return {int(line.split()[1].split(":")[1], 16) for line in f.readlines()[1:]}


class ArrayError(RuntimeError):
    pass


def _wait_bound(ports, procs, timeout=60):
    deadline = time.monotonic() + timeout
    while not set(ports) <= _bound_udp_ports():
        for name, p, _ in procs:
            if p.poll() is not None:
                raise ArrayError(f"{name} exited early (exit {p.returncode})")
        if time.monotonic() > deadline:
            raise ArrayError(f"UDP ports {sorted(ports)} were never bound")
        time.sleep(0.01)


def run_array(cbf_run, pipelines, out_dir, length, dump, base_port, extra_sets=(), timeout=240):
    """Runs the array to its end. Returns the X-engine files and the beam
    file; raises ArrayError naming the process that failed (its log is in
    out_dir)."""
    dig = [f"239.10.1.{i}:{base_port + i}" for i in range(2 * ANTENNAS)]
    xg = [f"239.10.2.{x}:{base_port + 2 * ANTENNAS + x}" for x in range(XENGINES)]
    bg = [f"239.10.3.{b}:{base_port + 2 * ANTENNAS + XENGINES + b}" for b in range(BEAMS)]
    procs = []

    def spawn(name, yaml_name, sets):
        log = open(os.path.join(out_dir, name + ".log"), "w")
        args = [cbf_run, os.path.join(pipelines, yaml_name), "--quiet"]
        for s in list(sets) + list(extra_sets):
            args += ["--set", s]
        procs.append((name, subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT), log))

    files = [os.path.join(out_dir, f"xeng{x}.h5") for x in range(XENGINES)]
    beams = os.path.join(out_dir, "beams.h5")
    try:
        spawn("beams", "array-beams.yaml", [f"recv.address={','.join(bg)}", "recv.idle_timeout=60",
                                            f"recv.stops={XENGINES * BEAMS}", f"sink.path={beams}"])
        _wait_bound([base_port + 2 * ANTENNAS + XENGINES + b for b in range(BEAMS)], procs)
        for x in range(XENGINES):
            spawn(f"xeng{x}", "array-xeng.yaml",
                  [f"recv.address={xg[x]}", f"recv.first_channel={CHANNELS_PER_X * x}", "recv.idle_timeout=60",
                   f"corr.heap_accumulation_threshold={dump}", f"recv.stops={ANTENNAS}",
                   f"sink.path={files[x]}", "sink.overwrite=true", f"bsend.destinations={','.join(bg)}"])
        _wait_bound([base_port + 2 * ANTENNAS + x for x in range(XENGINES)], procs)
        for a in range(ANTENNAS):
            spawn(f"feng{a}", "array-feng.yaml",
                  [f"recv.address={dig[2 * a]},{dig[2 * a + 1]}", f"post.feng_id={a}", f"send.feng_id={a}",
                   f"send.destinations={','.join(xg)}", "recv.idle_timeout=60"])
        _wait_bound(range(base_port, base_port + 2 * ANTENNAS), procs)
        spawn("digitiser", "array-digitiser.yaml", [f"send.destinations={','.join(dig)}", f"dsim.length={length}"])
        deadline = time.monotonic() + timeout
        for name, p, _ in procs:
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise ArrayError(f"the array did not finish in {timeout} s ({name} still running)")
            if p.returncode:
                raise ArrayError(f"{name} exited {p.returncode}: see {os.path.join(out_dir, name + '.log')}")
    finally:
        for _, p, log in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()
    return files, beams
