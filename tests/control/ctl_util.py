"""Helpers for the control-plane tests: a cbf-run process with its control
and sensor endpoints (bound to free loopback ports, read back from its log),
and cbf-ctl calls against it; the YAML of the engines they run (the
F-engine chain, the ctl_hold node); the skip when a Python peer is
missing. Every wait is bounded by a timeout; nothing sleeps to let
something happen."""
import importlib
import json
import os
import queue
import re
import socket
import subprocess
import sys
import threading
import time

BUILD = os.environ.get("CBF_BUILD_ROOT", "build")
CBF_RUN = os.path.join(BUILD, "tools", "cbf-run")
CBF_CTL = os.path.join(BUILD, "tools", "cbf-ctl")


def fail(msg):
    print("FAIL: " + msg)
    sys.exit(1)


def free_port(kind=socket.SOCK_STREAM):
    """A loopback port the system has free now (TCP by default)."""
    s = socket.socket(socket.AF_INET, kind)
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def check(cond, msg):
    if not cond:
        fail(msg)
    print("ok: " + msg)


def importable(*names):
    """The named modules, imported; exit 77 (skipped) naming the first one
    that is not installed for this Python."""
    try:
        return [importlib.import_module(n) for n in names]
    except ImportError as e:
        print(f"skipped: {e.name} is not installed for {sys.executable}")
        sys.exit(77)


def engine_yaml(nodes, edges=(), engine=()):
    """A pipeline's YAML text: the engine on the CPU with its control socket
    on a free loopback port and `engine`'s further "key: value" lines;
    `nodes` one "name: {plugin: ..., params: {...}}" line each, `edges` one
    "a.out -> b.in" each. The text may hold %-placeholders for the caller."""
    lines = ["engine:", "  gpu: none", "  control: tcp://127.0.0.1:*"]
    lines += ["  " + k for k in engine]
    lines += ["nodes:"] + ["  " + n for n in nodes]
    if edges:
        lines += ["edges:"] + ["  - " + e for e in edges]
    return "\n".join(lines) + "\n"


def feng_yaml(dsim, pfb, post, sink="{plugin: discard}", engine=(), nodes=(), edges=()):
    """engine_yaml of the F-engine the control tests change while it runs,
    dsim -> pfb -> post (fft_post) -> sink: dsim, pfb and post the inside of
    each node's params, sink the sink node's mapping; nodes and edges come
    after the F-engine's."""
    return engine_yaml(["dsim: {plugin: dsim, params: {%s}}" % dsim,
                        "pfb: {plugin: pfb, params: {%s}}" % pfb,
                        "post: {plugin: fft_post, params: {%s}}" % post,
                        "sink: " + sink] + list(nodes),
                       ["dsim.out -> pfb.in", "pfb.out -> post.in", "post.out -> sink.in"] + list(edges),
                       engine)


def hold_engine(tmp, engine=(), name="engine"):
    """An Engine of one node `hold` (tests/control/ctl_hold.c: a request
    that holds the node for as long as asked), with engine's further keys;
    its YAML is written to tmp/NAME.yaml. The test plugin is built beside
    the tests, so the plugin path names both folders."""
    env = {"CBF_PLUGIN_PATH": os.path.join(BUILD, "plugins") + ":" + os.path.join(BUILD, "tests", "control")}
    return Engine(engine_yaml(["hold: {plugin: ctl_hold}"], engine=engine),
                  os.path.join(tmp, name + ".yaml"), extra_env=env)


class Engine:
    """cbf-run on a YAML text; endpoints parsed from its info log. As a
    context manager it is killed on the way out if still running (after a
    failed check; a test that passes has shut it down)."""

    def __init__(self, yaml_text, path, extra_env=None, stdout=subprocess.DEVNULL):
        with open(path, "w") as f:
            f.write(yaml_text)
        env = dict(os.environ)
        env.update(extra_env or {})
        self.proc = subprocess.Popen([CBF_RUN, path, "--log-level", "info"],
                                     stdout=stdout, stderr=subprocess.PIPE,
                                     text=True, env=env)
        self.lines = queue.Queue()
        self.log = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.control = self.sensors = self.katcp = None
        deadline = time.monotonic() + 30
        while self.control is None or ("sensors:" in yaml_text and self.sensors is None) or \
                ("katcp:" in yaml_text and self.katcp is None):
            line = self.next_line(deadline)
            if line is None:
                self.kill()
                fail("engine did not report its endpoints; log:\n" + "".join(self.log))
            m = re.search(r"control: requests on (\S+)", line)
            if m:
                self.control = m.group(1)
            m = re.search(r"control: sensors on (\S+)", line)
            if m:
                self.sensors = m.group(1)
            m = re.search(r"katcp: requests on \[?([^\s\]]+)\]?:(\d+)", line)
            if m:
                self.katcp = (m.group(1), int(m.group(2)))

    def _read(self):
        for line in self.proc.stderr:
            self.log.append(line)
            self.lines.put(line)
        self.lines.put(None)

    def next_line(self, deadline):
        try:
            return self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            return None

    def ctl(self, *args, timeout=20):
        r = subprocess.run([CBF_CTL, "-e", self.control, "-t", "10"] + list(args),
                           capture_output=True, text=True, timeout=timeout)
        return r.returncode, r.stdout, r.stderr

    def request(self, obj):
        """Sends obj as JSON; returns (exit code, reply object or None, stderr)."""
        rc, out, err = self.ctl("--json", "raw", json.dumps(obj))
        return rc, (json.loads(out) if rc == 0 else None), err

    def running(self):
        return self.proc.poll() is None

    def shutdown(self, timeout=60):
        rc, out, err = self.ctl("shutdown")
        check(rc == 0, "shutdown request accepted (%s%s)" % (out.strip(), err.strip()))
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            fail("engine did not drain within %d s after shutdown" % timeout)
        self.reader.join(timeout=10)   # the log to its end, for the checks that read it
        return code

    def kill(self):
        if self.running():
            self.proc.kill()
            self.proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.kill()
        return False
