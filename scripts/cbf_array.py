"""The whole array as separate cbf-run processes, wired by
pipelines/array-*.yaml: 2 XB-engines of 512 channels each (each also
beamforms and sends 2 beams, a group per beam), the beam receiver that
records both engines' beams, 4 F-engines (one per antenna), and the
digitiser process (4 antennas, a group per polarisation). Receivers start
first, each stage only once the previous one's sockets are bound and its
multicast groups joined (read from the process's own /proc/PID/net, so in
its own network namespace too); every wait is bounded.

Where the processes run is the `hosts` argument: by default all on this
machine over loopback multicast; `cbf_netns.Hosts` puts each process on a
host of its own (a network namespace, `ip netns exec`) with its own
interface address, which goes into every receiver's and sender's
`interface`. Process (and host) names: beams, xeng0, xeng1, feng0..feng3,
digitiser.

Used by scripts/run-array (by hand), tests/net/array.py (checked against
the single-process array) and tests/net/multihost.py (namespaces, an
F-engine killed and restarted)."""
import os
import signal
import struct
import subprocess
import time

ANTENNAS, XENGINES, CHANNELS_PER_X, BEAMS = 4, 2, 512, 2

# The nodes of each process's pipeline that take an `interface`.
_INTERFACE_NODES = {"beams": ["recv"], "xeng": ["recv", "bsend"], "feng": ["recv", "send"], "digitiser": ["send"]}


class ArrayError(RuntimeError):
    pass


class Loopback:
    """Every process on this machine, multicast over loopback."""

    def wrap(self, name, args):
        return list(args)

    def address(self, name):
        return "127.0.0.1"


def _bound_udp_ports(pid):
    with open(f"/proc/{pid}/net/udp") as f:
        return {int(line.split()[1].split(":")[1], 16) for line in f.readlines()[1:]}


def _joined_groups(pid):
    """IPv4 groups joined on any interface of the process's namespace.
    (Not through the socket module: it imports `array`, which in
    tests/net is array.py.)"""
    groups = set()
    with open(f"/proc/{pid}/net/igmp") as f:
        for line in f.readlines()[1:]:
            if line.startswith("\t\t"):    # a group line under its device's
                groups.add(".".join(map(str, struct.pack("<I", int(line.split()[0], 16)))))
    return groups


def _poll(running, done, timeout, missing):
    """Calls done() every 10 ms until it returns true. running() lists the
    (name, Popen, hint) whose exit is a failure meanwhile; missing() says
    what never happened when timeout seconds pass. ArrayError either way."""
    deadline = time.monotonic() + timeout
    while True:
        for name, p, hint in running():
            if p.poll() is not None:
                raise ArrayError(f"{name} exited early (exit {p.returncode}){hint}")
        if done():
            return
        if time.monotonic() > deadline:
            raise ArrayError(missing())
        time.sleep(0.01)


def wait_bound(ports, procs, timeout=60):
    """Waits until the UDP ports are bound by the processes procs
    ((name, Popen, log) each, in this namespace), raising ArrayError when
    one exits first or the time runs out."""
    bound = set()

    def done():
        bound.clear()
        for _, p, _ in procs:
            try:
                bound.update(_bound_udp_ports(p.pid))
            except FileNotFoundError:
                pass
        return set(ports) <= bound

    _poll(lambda: [(name, p, "") for name, p, _ in procs], done, timeout,
          lambda: f"UDP ports {sorted(set(ports) - bound)} were never bound")


def _die_with_parent():
    """In the child before exec: SIGKILL when the launching process dies,
    however it dies (prctl PR_SET_PDEATHSIG; kept across `ip netns exec`'s
    exec), so no engine outlives a killed run."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL, 0, 0, 0)


def role(name):
    return name.rstrip("0123456789")


class Array:
    """The array's processes. start() brings them up in order; wait() runs
    them to their end; kill() and restart() act on one; close() ends what
    still runs (also on leaving a `with` block)."""

    def __init__(self, cbf_run, pipelines, out_dir, dump, base_port, length=0, hosts=None,
                 extra_sets=(), role_sets=None):
        """extra_sets: --set overrides for every process, `{name}` in them
        replaced by the process's name (a control endpoint per engine, say);
        role_sets: more for each role (beams, xeng, feng, digitiser)."""
        self.cbf_run, self.pipelines, self.out_dir = cbf_run, pipelines, out_dir
        self.hosts = hosts or Loopback()
        self.extra_sets, self.role_sets = list(extra_sets), dict(role_sets or {})
        self.procs = {}      # name -> (Popen, log file)
        self.args = {}       # name -> command, for restart()
        self.ready = {}      # name -> (ports, groups) that say it is listening
        self.dig = [(f"239.10.1.{i}", base_port + i) for i in range(2 * ANTENNAS)]
        self.xg = [(f"239.10.2.{x}", base_port + 2 * ANTENNAS + x) for x in range(XENGINES)]
        self.bg = [(f"239.10.3.{b}", base_port + 2 * ANTENNAS + XENGINES + b) for b in range(BEAMS)]
        self.files = [os.path.join(out_dir, f"xeng{x}.h5") for x in range(XENGINES)]
        self.beams = os.path.join(out_dir, "beams.h5")
        self.dump, self.length = dump, length

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def log(self, name):
        return os.path.join(self.out_dir, name + ".log")

    def _spawn(self, name, yaml_name, sets, listens=()):
        r = role(name)
        sets = list(sets) + [f"{node}.interface={self.hosts.address(name)}" for node in _INTERFACE_NODES[r]]
        args = [self.cbf_run, os.path.join(self.pipelines, yaml_name), "--quiet"]
        for s in sets + self.extra_sets + list(self.role_sets.get(r, ())):
            args += ["--set", s.replace("{name}", name)]
        self.args[name] = self.hosts.wrap(name, args)
        self.ready[name] = ({port for _, port in listens}, {group for group, _ in listens})
        self._launch(name)

    def _launch(self, name):
        log = open(self.log(name), "a")
        self.procs[name] = (subprocess.Popen(self.args[name], stdout=log, stderr=subprocess.STDOUT,
                                             preexec_fn=_die_with_parent), log)

    def _wait_listening(self, names, timeout=60):
        waiting = list(names)

        def done():
            for name in list(waiting):
                ports, groups = self.ready[name]
                pid = self.procs[name][0].pid
                try:
                    if ports <= _bound_udp_ports(pid) and groups <= _joined_groups(pid):
                        waiting.remove(name)
                except OSError:
                    pass     # between fork and exec, or `ip netns exec` not yet in its namespace
            return not waiting

        _poll(lambda: [(n, self.procs[n][0], f": see {self.log(n)}") for n in waiting], done, timeout,
              lambda: f"{', '.join(waiting)} never bound and joined {[self.ready[n] for n in waiting]}")

    @staticmethod
    def _addrs(groups):
        return ",".join(f"{g}:{p}" for g, p in groups)

    def start(self):
        self._spawn("beams", "array-beams.yaml",
                    [f"recv.address={self._addrs(self.bg)}", "recv.idle_timeout=60",
                     f"recv.stops={XENGINES * BEAMS}", f"sink.path={self.beams}"], self.bg)
        self._wait_listening(["beams"])
        for x in range(XENGINES):
            self._spawn(f"xeng{x}", "array-xeng.yaml",
                        [f"recv.address={self._addrs(self.xg[x:x + 1])}", f"recv.first_channel={CHANNELS_PER_X * x}",
                         "recv.idle_timeout=60", f"corr.heap_accumulation_threshold={self.dump}",
                         f"recv.stops={ANTENNAS}", f"sink.path={self.files[x]}", "sink.overwrite=true",
                         f"bsend.destinations={self._addrs(self.bg)}"], self.xg[x:x + 1])
        self._wait_listening([f"xeng{x}" for x in range(XENGINES)])
        for a in range(ANTENNAS):
            self._spawn(f"feng{a}", "array-feng.yaml",
                        [f"recv.address={self._addrs(self.dig[2 * a:2 * a + 2])}", f"post.feng_id={a}",
                         f"send.feng_id={a}", f"send.destinations={self._addrs(self.xg)}", "recv.idle_timeout=60"],
                        self.dig[2 * a:2 * a + 2])
        self._wait_listening([f"feng{a}" for a in range(ANTENNAS)])
        self._spawn("digitiser", "array-digitiser.yaml",
                    [f"send.destinations={self._addrs(self.dig)}", f"dsim.length={self.length}"])

    def alive(self, name):
        return self.procs[name][0].poll() is None

    def kill(self, name):
        """SIGKILL: the process sends nothing more, not even a stream stop."""
        p = self.procs[name][0]
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=30)

    def restart(self, name):
        """The same command again, once it listens as the first did."""
        if self.alive(name):
            raise ArrayError(f"{name} is still running")
        self.procs[name][1].close()
        self._launch(name)
        self._wait_listening([name])

    def wait(self, timeout=240, skip=()):
        """Waits for every process (except `skip`) to exit 0."""
        deadline = time.monotonic() + timeout
        for name, (p, _) in self.procs.items():
            if name in skip:
                continue
            try:
                p.wait(timeout=max(1.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                raise ArrayError(f"the array did not finish in {timeout} s ({name} still running)")
            if p.returncode:
                raise ArrayError(f"{name} exited {p.returncode}: see {self.log(name)}")

    def close(self):
        for _, (p, log) in self.procs.items():
            if p.poll() is None:
                p.kill()
                p.wait()
            log.close()


def run_array(cbf_run, pipelines, out_dir, length, dump, base_port, extra_sets=(), timeout=240, hosts=None):
    """Runs the array to its end. Returns the X-engine files and the beam
    file; raises ArrayError naming the process that failed (its log is in
    out_dir)."""
    with Array(cbf_run, pipelines, out_dir, dump, base_port, length, hosts, extra_sets) as array:
        array.start()
        array.wait(timeout)
    return array.files, array.beams
