"""Hosts as Linux network namespaces, for tests that need the network
between engines to be a network: each host its own namespace with one
veth interface (eth0) and its own address, every veth's peer a port of
one Linux bridge in a namespace of its own (the switch), with IGMP
snooping and the bridge as querier, so multicast reaches only the ports
that joined a group, as on a data-centre switch. Nothing is added to the
namespace the caller runs in.

Names carry the creating process's id (cbfnet<pid>-<host>), so parallel
runs never collide, and namespaces left by a run that was killed outright
(its pid gone) are removed by the next run. Needs root (CAP_SYS_ADMIN and
CAP_NET_ADMIN) and iproute2; `unavailable()` says why not, for a test to
skip with.

    with Hosts(["dig", "feng0", "xeng0"]) as net:
        subprocess.Popen(net.wrap("feng0", ["cbf-run", ...]))   # ip netns exec
        net.address("feng0")                                      # 10.201.0.2

Used by tests/net/multihost.py through scripts/cbf_array.py."""
import os
import re
import shutil
import signal
import subprocess

PREFIX = "cbfnet"
SUBNET = "10.201.0."     # private to the run: its namespaces reach nothing else


def _ip(*args, check=True):
    r = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=20)
    if check and r.returncode:
        raise NetnsError(f"ip {' '.join(args)}: {(r.stderr or r.stdout).strip()}")
    return r


class NetnsError(RuntimeError):
    pass


def _namespaces():
    r = _ip("netns", "list", check=False)
    return [line.split()[0] for line in r.stdout.splitlines() if line.strip()]


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def sweep_stale():
    """Removes namespaces of runs whose process is gone (killed before its
    clean-up could run). Returns their names."""
    gone = []
    for ns in _namespaces():
        m = re.fullmatch(PREFIX + r"(\d+)-.+", ns)
        if m and not _alive(int(m.group(1))):
            _kill_inside(ns)
            _ip("netns", "del", ns, check=False)
            gone.append(ns)
    return gone


def _kill_inside(ns):
    """SIGKILLs what still runs in a namespace of ours (processes this run
    started there, by their ids), so the namespace really goes."""
    r = _ip("netns", "pids", ns, check=False)
    for pid in r.stdout.split():
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass


def unavailable():
    """None where namespaces can be made here, else the reason."""
    if os.geteuid() != 0:
        return "not root: network namespaces need CAP_SYS_ADMIN and CAP_NET_ADMIN"
    if not shutil.which("ip"):
        return "no `ip` (iproute2)"
    probe = f"{PREFIX}{os.getpid()}-probe"
    try:
        _ip("netns", "add", probe)
        _ip("-n", probe, "link", "add", "br0", "type", "bridge", "mcast_snooping", "1", "mcast_querier", "1")
    except (NetnsError, OSError, subprocess.SubprocessError) as e:
        return f"cannot make a namespace with a bridge: {e}"
    finally:
        _ip("netns", "del", probe, check=False)
    return None


def exit_on_signals():
    """SIGTERM and SIGHUP raise SystemExit and SIGINT KeyboardInterrupt
    (even where the shell started us with it ignored, as it does a
    background job), so `with Hosts(...)` cleans up when Ctrl-C, meson's
    timeout or a closed terminal ends the run."""
    def handler(signum, frame):
        raise SystemExit(128 + signum)
    for s in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(s, handler)
    signal.signal(signal.SIGINT, signal.default_int_handler)


class Hosts:
    """Namespaces for `names` (at most 250), wired to one snooping bridge;
    removed, with whatever still runs inside, by close() or on leaving the
    `with` block, whatever the way out."""

    def __init__(self, names):
        if len(set(names)) != len(names) or len(names) > 250:
            raise ValueError("host names must be distinct, at most 250")
        self.names = list(names)
        self.tag = f"{PREFIX}{os.getpid()}"
        self.switch = f"{self.tag}-switch"
        self.made = []

    def ns(self, name):
        return f"{self.tag}-{name}"

    def address(self, name):
        return SUBNET + str(self.names.index(name) + 1)

    def wrap(self, name, args):
        """The command that runs args on host `name`; `ip netns exec` execs
        it, so the process's id is the one Popen returns."""
        return ["ip", "netns", "exec", self.ns(name), *args]

    def __enter__(self):
        try:
            self.open()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc):
        self.close()

    def open(self):
        sweep_stale()
        self._add(self.switch)
        # Snooping with the bridge as querier: ports get only the groups
        # their host joined (queries keep the memberships fresh).
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge", "mcast_snooping", "1",
            "mcast_querier", "1", "mcast_igmp_version", "3")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        for i, name in enumerate(self.names):
            ns = self.ns(name)
            self._add(ns)
            _ip("-n", self.switch, "link", "add", f"p{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", self.switch, "link", "set", f"p{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", self.address(name) + "/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", ns, "link", "set", "lo", "up")
            # Multicast leaves by eth0, whatever the sender's interface option.
            _ip("-n", ns, "route", "add", "224.0.0.0/4", "dev", "eth0")

    def _add(self, ns):
        _ip("netns", "add", ns)
        self.made.append(ns)

    def close(self):
        for ns in reversed(self.made):
            _kill_inside(ns)
            _ip("netns", "del", ns, check=False)
        self.made = []

    def switch_groups(self):
        """{IPv4 group: set of host names} the bridge has learned from IGMP."""
        r = subprocess.run(["bridge", "-n", self.switch, "mdb", "show"], capture_output=True, text=True, timeout=20)
        groups = {}
        for m in re.finditer(r"port p(\d+) grp (\d+\.\d+\.\d+\.\d+)", r.stdout):
            groups.setdefault(m.group(2), set()).add(self.names[int(m.group(1))])
        return groups
