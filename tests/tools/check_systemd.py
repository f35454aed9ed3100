#!/usr/bin/env python3
"""systemd/cbf@.service, as meson configured it, passes `systemd-analyze
verify` with nothing to say: the template and an instance of it
(cbf@feng0.service), with ExecStart pointed at the build's cbf-run since
verify checks that the command exists. A copy with a misspelt key must
draw a complaint first, or this systemd-analyze cannot check anything here
and the test is skipped (77) with its reason.

usage: check_systemd.py UNIT CBF_RUN"""
import os
import re
import shutil
import subprocess
import sys
import tempfile


def verify(path):
    r = subprocess.run(["systemd-analyze", "verify", "--man=no", path], capture_output=True, text=True)
    # Lines about other units (the host's own) are not ours to judge.
    mine = [l for l in (r.stdout + r.stderr).splitlines() if "cbf@" in l or not l.startswith("/")]
    return r.returncode, [l for l in mine if l.strip()]


def main():
    unit, cbf_run = sys.argv[1], os.path.abspath(sys.argv[2])
    if not shutil.which("systemd-analyze"):
        print("skipped: systemd-analyze is not installed")
        return 77
    text = open(unit).read()
    exec_start = re.search(r"^ExecStart=(\S+)", text, re.M)
    if not exec_start or not exec_start.group(1).endswith("/cbf-run"):
        print(f"FAIL: {unit}: no ExecStart=.../cbf-run line")
        return 1
    text = text.replace(exec_start.group(1), cbf_run)
    with tempfile.TemporaryDirectory() as tmp:
        bad = os.path.join(tmp, "cbf@check.service")
        open(bad, "w").write(text.replace("RestartSec=", "RestartSecs="))
        rc, out = verify(bad)
        if rc == 0 and not any("RestartSecs" in l for l in out):
            print(f"skipped: systemd-analyze verify does not report a misspelt key here (exit {rc}: {out})")
            return 77
        for name in ("cbf@.service", "cbf@feng0.service"):
            path = os.path.join(tmp, name)
            open(path, "w").write(text)
            rc, out = verify(path)
            if rc or out:
                print(f"FAIL: systemd-analyze verify {name}: exit {rc}:\n" + "\n".join(out))
                return 1
    missing = [k for k in ("Restart=on-failure", "LimitMEMLOCK=infinity", "User=cbf", "RestartPreventExitStatus=2",
                           "AmbientCapabilities=CAP_NET_RAW CAP_IPC_LOCK") if k not in text]
    print(f"FAIL: {unit} lacks {', '.join(missing)}" if missing else
          "ok: cbf@.service and cbf@feng0.service verify clean; a misspelt key is reported")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
