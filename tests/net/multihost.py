#!/usr/bin/env python3
"""The array across hosts: every process of scripts/cbf_array.py (a
digitiser host, 4 F-engine hosts, 2 XB-engine hosts and the beam
receiver's host) in a network namespace of its own with its own address,
each host's veth a port of one Linux bridge with IGMP snooping and a
querier (scripts/cbf_netns.py), multicast between them.

Run 1: a finite dsim stream. The bridge must have learned each group on
the port of the one host that joined it (snooping forwards it nowhere
else), and the X-engines' visibilities and the beam receiver's beams must
equal the single-process XB-engine's bit for bit (tests/net/array.py's
check).

Run 2: a continuous digitiser paced by the wall clock (dsim `realtime`,
engine `sync_time`, at ADC_RATE samples/s so that 8 processes keep up on
2 cores). Once both X-engines have made a dump with every antenna,
F-engine KILLED gets SIGKILL (it sends nothing more, not even a stream
stop); once both have made a dump with its antenna flagged, it is started
again; once both have made two dumps with every antenna after that, the
digitiser is shut down through its control socket and the whole array
must drain and exit 0 (the X-engines kept running). Then, in both
X-engines' files, from the first dump with every antenna on:
  - the dumps with any antenna flagged are consecutive, at least one, and
    flag exactly the killed antenna; none of them is among the dumps the
    X-engine had made when the kill came (its reducer's `dumps` then);
  - the antenna is back at the latest at the first dump that starts after
    the restarted engine's first whole batch (computed from the wall-clock
    time it was listening again, through sync_time): so the affected dumps
    are bounded by the stream time from the kill to the restart;
  - every baseline of the killed antenna in the flagged dumps holds the
    missing-data value (-2^31, 1) and every other value equals the
    reference.
The reference: pipelines/demo.yaml in one process (xbeng.yaml's
visibilities without its beams, which run 2 does not check), dsim not paced but
started (`start`) one dump before the run's first full dump, with the same
sample rate and tone, so it computes the same samples at the same
timestamps (dsim's samples depend only on their index); its dumps from
the second on are complete and are compared by timestamp.

Every wait is on something observable (ports bound and groups joined in
the process's namespace, the X-engines' reducer counters over their
control sockets), and bounded. Skips (77) where namespaces cannot be made.

usage: multihost.py CBF_RUN CBF_CTL [--keep DIR]
"""
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(HERE, "..", ".."))
PIPE = os.path.join(ROOT, "pipelines")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
import cbf_netns  # noqa: E402

try:
    import h5py
    import numpy as np
except ImportError as e:  # pragma: no cover
    print(f"skipped: h5py/numpy not importable ({e})")
    sys.exit(77)

from cbf_array import ANTENNAS, CHANNELS_PER_X, XENGINES, Array, ArrayError, run_array  # noqa: E402

# tests/net/array.py by path: as `array` it would be the standard module.
_spec = importlib.util.spec_from_file_location("array_test", os.path.join(HERE, "array.py"))
array_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(array_test)

HOSTS = ["digitiser"] + [f"feng{a}" for a in range(ANTENNAS)] + [f"xeng{x}" for x in range(XENGINES)] + ["beams"]
BASE_PORT = 7148          # every run has its own namespaces: no port is shared with anything
DUMP = 4                  # batches per dump
BATCH = 256 * 2048        # samples per batch (spectra_per_heap x samples_between_spectra)
INTERVAL = DUMP * BATCH   # samples per dump
CHUNK = 1048576           # digitiser samples per chunk
PFB_WINDOW = 16 * 2048    # samples a spectrum's window reads (taps x step)
# Run 2's ADC rate: 1 MHz makes a dump 2.1 s, longer than an F-engine's
# restart, and the 8 processes' load about half a core.
ADC_RATE = 1e6
TONE = ADC_RATE * 300 / 2048        # channel 300, as the pipelines' tone at 1712 MHz
KILLED = 2
MAGIC = (-2 ** 31, 1)


def fail(msg):
    print("FAIL:", msg, flush=True)
    sys.exit(1)


def fail_array(e):
    log = str(e).split("see ")[-1]
    fail(f"{e}: {open(log).read()[-3000:] if os.path.exists(log) else ''}")


def run1(cbf_run, net, tmp):
    t0 = time.monotonic()
    try:
        files, beams = run_array(cbf_run, PIPE, tmp, array_test.LENGTH, DUMP, BASE_PORT, hosts=net, timeout=120)
    except ArrayError as e:
        fail_array(e)
    # Snooping on: each data group known on the port of its one receiver.
    want = {f"239.10.1.{i}": {f"feng{i // 2}"} for i in range(2 * ANTENNAS)}
    want.update({f"239.10.2.{x}": {f"xeng{x}"} for x in range(XENGINES)})
    want.update({f"239.10.3.{b}": {"beams"} for b in range(2)})
    got = {g: hs for g, hs in net.switch_groups().items() if g.startswith("239.10.")}
    if got != want:
        fail(f"the bridge's multicast database {got}, expected {want}")
    array_test.check(cbf_run, tmp, files, beams, what=f"{len(HOSTS)} network namespaces over a snooping bridge")
    print(f"run 1: {time.monotonic() - t0:.1f} s", flush=True)


class Sensors:
    """The X-engines' reducer counters through cbf-ctl on their control
    sockets (ipc: reachable from any network namespace)."""

    def __init__(self, cbf_ctl, tmp):
        self.cbf_ctl, self.tmp = cbf_ctl, tmp

    def endpoint(self, name):
        return f"ipc://{self.tmp}/{name}.ctl"

    def reducer(self, name):
        r = subprocess.run([self.cbf_ctl, "-e", self.endpoint(name), "-t", "5", "--json", "sensors"],
                           capture_output=True, text=True, timeout=30)
        if r.returncode:
            return None
        c = json.loads(r.stdout)["sensors"]["nodes"]["reduce"]["counters"]
        return c["dumps"], c["flagged_antenna_dumps"]


def wait_dumps(array, sensors, what, flagged, count=1, timeout=60):
    """Waits until every X-engine has made `count` more dumps with no
    antenna flagged (flagged False) or with some flagged (True), judged by
    the change of its counters `dumps` and `flagged_antenna_dumps` between
    two readings."""
    names = [f"xeng{x}" for x in range(XENGINES)]
    last = {n: None for n in names}
    seen = {n: 0 for n in names}
    deadline = time.monotonic() + timeout
    while min(seen.values()) < count:
        for n in names:
            if not array.alive(n):
                raise ArrayError(f"{n} exited (exit {array.procs[n][0].returncode}) waiting for {what}: "
                                 f"see {array.log(n)}")
            now = sensors.reducer(n)
            if now and last[n] and now[0] > last[n][0] and flagged == (now[1] > last[n][1]):
                seen[n] += 1
            last[n] = now or last[n]
        if time.monotonic() > deadline:
            raise ArrayError(f"no {what} within {timeout} s ({seen})")
        time.sleep(0.1)


def timestamp_now(sync_time):
    return (time.time() - sync_time) * ADC_RATE


def run2(cbf_run, cbf_ctl, net, tmp):
    t0 = time.monotonic()
    sync_time = int(time.time()) - 1
    sensors = Sensors(cbf_ctl, tmp)
    extra = [f"engine.adc_sample_rate={ADC_RATE}", f"engine.sync_time={sync_time}",
             f"engine.control={sensors.endpoint('{name}')}"]
    # F-engines paced by one clock need little room for skew: 4 batches
    # (2 s) instead of 8 bring each dump out sooner.
    roles = {"digitiser": ["dsim.realtime=true", f"dsim.tones=[{{frequency: {TONE}, amplitude: 0.2}}]",
                           "send.rate_gbps=1"],
             "xeng": ["recv.chunks_in_flight=4"]}
    name = f"feng{KILLED}"
    with Array(cbf_run, PIPE, tmp, DUMP, BASE_PORT, 0, net, extra, roles) as array:
        try:
            array.start()
            wait_dumps(array, sensors, "dump with every antenna", flagged=False)
            # Dumps already out can't lose the antenna: they bound the gap.
            made = [sensors.reducer(f"xeng{x}") for x in range(XENGINES)]
            if None in made:
                raise ArrayError(f"no sensors from the X-engines ({made})")
            ts_kill = timestamp_now(sync_time)
            array.kill(name)
            wait_dumps(array, sensors, f"dump with antenna {KILLED} flagged", flagged=True)
            array.restart(name)
            ts_ready = timestamp_now(sync_time)
            wait_dumps(array, sensors, "dump with every antenna after the restart", flagged=False, count=2)
            r = subprocess.run([cbf_ctl, "-e", sensors.endpoint("digitiser"), "shutdown"],
                               capture_output=True, text=True, timeout=30)
            if r.returncode:
                raise ArrayError(f"the digitiser's shutdown request: {r.stdout}{r.stderr}")
            array.wait(timeout=60)
        except ArrayError as e:
            fail_array(e)
    print(f"run 2: the array ran {time.monotonic() - t0:.1f} s; F-engine {KILLED} killed at timestamp "
          f"{ts_kill:.0f}, listening again at {ts_ready:.0f}", flush=True)
    # The restarted engine has every sample from ts_ready on (dsim sends a
    # chunk once its last sample's time has come): its first whole batch
    # starts at the latest one PFB window after that, on the batch grid;
    # the first dump from there on must have the antenna.
    first_batch = -(-(ts_ready + PFB_WINDOW) // BATCH) * BATCH
    back_by = -(-first_batch // INTERVAL) * INTERVAL
    got = []
    for x, path in enumerate(array.files):
        f = h5py.File(path)["reduce"]
        got.append((f["timestamp"][()].astype(np.int64), f["present"][()].astype(bool), f["data"][()]))
    firsts = []
    for x, (ts, present, _) in enumerate(got):
        full = np.flatnonzero(present.all(axis=1))
        if len(full) == 0:
            fail(f"X-engine {x}: no dump with every antenna ({len(ts)} dumps)")
        firsts.append(int(ts[full[0]]))
    start = max(0, min(firsts) - INTERVAL)
    end = max(int(ts[-1]) for ts, _, _ in got) + 2 * INTERVAL
    length = -(-(end - start) // CHUNK) * CHUNK
    ref_path = os.path.join(tmp, "ref2.h5")
    subprocess.run([cbf_run, os.path.join(PIPE, "demo.yaml"), "--quiet", "--set", f"dsim.start={start}",
                    "--set", f"dsim.length={length}", "--set", f"engine.adc_sample_rate={ADC_RATE}",
                    "--set", f"dsim.tones=[{{frequency: {TONE}, amplitude: 0.2}}]",
                    "--set", f"corr.heap_accumulation_threshold={DUMP}", "--set", f"sink.path={ref_path}"],
                   check=True, timeout=240)
    ref = h5py.File(ref_path)["reduce"]
    ref_by_ts = {int(t): i for i, t in enumerate(ref["timestamp"][()])}
    ref_vis, ref_present = ref["data"], ref["present"][()]
    bl = [(a1, a2) for a2 in range(ANTENNAS) for a1 in range(a2 + 1)]
    killed_bl = np.array([KILLED in pair for pair in bl])
    killed_products = np.repeat(killed_bl, 4)
    summary = []
    for x, (ts, present, vis) in enumerate(got):
        i0 = int(np.flatnonzero(present.all(axis=1))[0])
        flagged = [i for i in range(i0, len(ts)) if not present[i].all()]
        if not flagged:
            fail(f"X-engine {x}: no dump flagged after the kill")
        if flagged != list(range(flagged[0], flagged[-1] + 1)):
            fail(f"X-engine {x}: flagged dumps {flagged} are not consecutive")
        for i in flagged:
            if list(np.flatnonzero(~present[i])) != [KILLED]:
                fail(f"X-engine {x}: dump at {ts[i]} flags antennas {np.flatnonzero(~present[i])}, "
                     f"not antenna {KILLED} alone")
        if flagged[0] < made[x][0]:
            fail(f"X-engine {x}: dump {flagged[0]} flagged, but it had made {made[x][0]} dumps before the kill")
        t_back = int(ts[flagged[-1] + 1]) if flagged[-1] + 1 < len(ts) else None
        if t_back is None or t_back > back_by:
            fail(f"X-engine {x}: antenna {KILLED} back at dump {t_back}, expected by {back_by} "
                 f"(restarted engine's first whole batch {first_batch})")
        if len(ts) - 1 - flagged[-1] < 2:
            fail(f"X-engine {x}: fewer than 2 dumps after the antenna came back")
        chans = slice(CHANNELS_PER_X * x, CHANNELS_PER_X * (x + 1))
        for i in range(i0, len(ts)):
            j = ref_by_ts.get(int(ts[i]))
            if j is None or not ref_present[j].all():
                fail(f"X-engine {x}: dump at {ts[i]} is not a whole dump of the reference")
            want = ref_vis[j][chans]                                      # [channel][bl x 4][2]
            if present[i].all():
                if not np.array_equal(vis[i], want):
                    fail(f"X-engine {x}: dump at {ts[i]} differs from the reference in "
                         f"{int((vis[i] != want).sum())} values")
                continue
            if not np.array_equal(vis[i][:, ~killed_products], want[:, ~killed_products]):
                fail(f"X-engine {x}: dump at {ts[i]}: baselines without antenna {KILLED} differ from the reference")
            if not ((vis[i][:, killed_products, 0] == MAGIC[0]).all() and (vis[i][:, killed_products, 1] == MAGIC[1]).all()):
                fail(f"X-engine {x}: dump at {ts[i]}: antenna {KILLED}'s baselines do not all hold {MAGIC}")
        summary.append(f"X-engine {x}: {len(ts) - i0} dumps checked ({i0} start-up dumps before), "
                       f"{len(flagged)} flagged (from {int(ts[flagged[0]])}, the first dump after the "
                       f"{made[x][0]} made before the kill), antenna back at {t_back} (by {back_by:.0f})")
    print("ok: run 2, F-engine killed and restarted on its host: " + "; ".join(summary), flush=True)
    print(f"run 2: {time.monotonic() - t0:.1f} s", flush=True)


def main():
    cbf_run, cbf_ctl = sys.argv[1], sys.argv[2]
    keep = sys.argv[sys.argv.index("--keep") + 1] if "--keep" in sys.argv else None
    reason = cbf_netns.unavailable()
    if reason:
        print(f"skipped: {reason}")
        return 77
    cbf_netns.exit_on_signals()
    tmp = tempfile.mkdtemp(prefix="cbf-multihost-")
    try:
        with cbf_netns.Hosts(HOSTS) as net:
            os.makedirs(os.path.join(tmp, "1"))
            os.makedirs(os.path.join(tmp, "2"))
            run1(cbf_run, net, os.path.join(tmp, "1"))
            run2(cbf_run, cbf_ctl, net, os.path.join(tmp, "2"))
    finally:
        if keep:
            shutil.copytree(tmp, keep, dirs_exist_ok=True, ignore=shutil.ignore_patterns("*.ctl"))
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
