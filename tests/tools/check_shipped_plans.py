#!/usr/bin/env python3
"""Every array description the project ships plans, and bad ones are
refused at their place.

- Every pipelines/plans/*.yaml (found by globbing, so a new one is covered
  without editing this test): a description (it has an `array:` section)
  must give exit 0 for `cbf-array FILE --out DIR` and `--check`, and every
  pipeline --out writes must be listed once in processes.tsv and load as
  cbf-run loads it (array_load). A file without `array:` is a budget file:
  `--out` on it must be refused (exit 2) at file:line:column as a budget
  file, and some description must name it in array.budget.
- Every ```yaml block of docs/*.md and README.md whose first section is
  `array:` is a description: saved in a copy of pipelines/plans/ (its
  `budget:` is relative to its own file, as the docs say), it must plan and
  its pipelines load the same way.
- Malformed descriptions, each a shipped one with one thing broken: exit 2
  and one line starting with file:line:column of the offending key or
  value (found in the broken copy, not written down here), nothing written.

usage: check_shipped_plans.py CBF_ARRAY ARRAY_LOAD SOURCE_ROOT"""
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

DESCRIPTION = re.compile(r"^array:", re.M)
YAML_BLOCK = re.compile(r"^```yaml\n(.*?)^```", re.M | re.S)


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def place(text, token):
    """line:column (1-based) of token in text; a token starting with spaces
    is a whole line, named at its key."""
    i = text.index(token) + len(token) - len(token.lstrip(" "))
    return f"{text.count(chr(10), 0, i) + 1}:{i - (text.rfind(chr(10), 0, i) + 1) + 1}"


def cbf_array(tool, desc, *args):
    return subprocess.run([tool, desc, *args], capture_output=True, text=True)


def plans(tool, array_load, desc, out):
    """desc plans (--check and --out) and every written pipeline loads; the
    number of processes."""
    for args in (["--check"], ["--out", out]):
        r = cbf_array(tool, desc, *args)
        if r.returncode:
            fail(f"cbf-array {desc} {' '.join(args)}: exit {r.returncode}: {r.stderr.strip()}")
    rows = [l.split("\t") for l in open(os.path.join(out, "processes.tsv")).read().splitlines()
            if not l.startswith("#")]
    files = sorted(row[4] for row in rows)
    written = sorted(os.path.basename(f) for f in glob.glob(os.path.join(out, "*.yaml")))
    if not rows or files != written or len(set(files)) != len(files):
        fail(f"{desc}: processes.tsv lists {files}, {out} holds {written}")
    if not any(row[1].startswith("xeng") for row in rows) or not any(row[1].startswith("feng") for row in rows):
        fail(f"{desc}: the plan has no X-engine or no F-engine: {[row[1] for row in rows]}")
    r = subprocess.run([array_load] + [os.path.join(out, f) for f in files], capture_output=True, text=True)
    if r.returncode:
        fail(f"{desc}: the written pipelines do not load: {r.stdout}{r.stderr}")
    return len(rows)


def refused(tool, desc, text, token, msg, tmp):
    """cbf-array --out refuses desc (holding text) with exit 2 at token's place."""
    out = os.path.join(tmp, "refused-out")
    r = cbf_array(tool, desc, "--out", out)
    where = f"{desc}:{place(text, token)}: "
    line = r.stderr.strip()
    if r.returncode != 2 or not line.startswith("cbf-array: " + where) or "\n" in line \
            or not re.search(msg, line) or os.path.exists(out):
        fail(f"{desc}: want exit 2, one line 'cbf-array: {where}...{msg}', nothing written; "
             f"got exit {r.returncode}: {r.stderr.strip()}")
    print(f"ok: refused: {line}")


def doc_descriptions(root):
    """(name, text) of every description block in the docs."""
    found = []
    for md in sorted(glob.glob(os.path.join(root, "docs", "*.md"))) + [os.path.join(root, "README.md")]:
        for i, block in enumerate(YAML_BLOCK.findall(open(md).read())):
            if DESCRIPTION.match(block):
                found.append((f"{os.path.basename(md)[:-3]}-{i}", block))
    return found


# (what, shipped file, old text (every occurrence), new text, token whose place the message names, message)
BAD = [
    ("no first_interface, no hosts", "meerkat.yaml", "  first_interface: 10.0.0.1\n", "",
     "  gpus_per_host", r"sizing.first_interface is not given"),
    ("first_interface not an address", "meerkat.yaml", "first_interface: 10.0.0.1", "first_interface: 10.0.0",
     "10.0.0\n", r"sizing.first_interface: '10.0.0' is not an IPv4 address"),
    ("sizing typo", "ska-mid.yaml", "  nic_gbps: 100", "  nic_gpbs: 100", "nic_gpbs",
     r"has no parameter 'nic_gpbs'; did you mean 'nic_gbps'\?"),
    ("xengines 0 without a budget", "meerkat.yaml", "  budget: budget-h100.yaml\n", "", "  name: meerkat",
     r"array.xengines is 0, which leaves the count to the sizing: .*:\d+:\d+: array.budget is not given"),
    ("no digitiser host", "scaling-0.yaml", "  d0: {roles: digitiser", "  d0: {roles: feng", "1\n  length",
     r"no host has role 'digitiser' \(simulate.digitisers is not 0\)"),
    ("no xeng host", "scaling-0.yaml", "{roles: xeng,", "{roles: feng,", "  f0: {roles: feng",
     r"no host has role 'xeng' \(the X-engines\)"),
]


def main():
    tool, array_load, root = sys.argv[1:4]
    plans_dir = os.path.join(root, "pipelines", "plans")
    shipped = sorted(glob.glob(os.path.join(plans_dir, "*.yaml")))
    texts = {os.path.basename(p): open(p).read() for p in shipped}
    descs = [n for n, t in texts.items() if DESCRIPTION.search(t)]
    budgets = [n for n in texts if n not in descs]
    docs = doc_descriptions(root)
    if not descs or not docs:
        fail(f"found {len(descs)} shipped descriptions and {len(docs)} in the docs; want some of each")
    with tempfile.TemporaryDirectory() as tmp:
        for n in descs:
            k = plans(tool, array_load, os.path.join(plans_dir, n), os.path.join(tmp, n[:-5]))
            print(f"ok: pipelines/plans/{n}: {k} processes planned and loaded")
        for n in budgets:
            named = [d for d in descs if re.search(rf"^\s*budget:\s*{re.escape(n)}\s*(#.*)?$", texts[d], re.M)]
            if not named:
                fail(f"pipelines/plans/{n} has no array section and no description names it in array.budget")
            token = re.search(r"^(pcie_h2d_gbs|pcie_d2h_gbs|feng_gsps|corr_ants|corr_tops|beam_tflops):",
                              texts[n], re.M)[1]
            refused(tool, os.path.join(plans_dir, n), texts[n], token, r"this is a budget file", tmp)
        # The docs' descriptions, saved beside the shipped plans and budgets.
        beside = os.path.join(tmp, "plans")
        shutil.copytree(plans_dir, beside)
        for name, text in docs:
            desc = os.path.join(beside, f"{name}.yaml")
            open(desc, "w").write(text)
            texts[f"{name}.yaml"] = text
            k = plans(tool, array_load, desc, os.path.join(tmp, name))
            print(f"ok: docs' description {name}: {k} processes planned and loaded")
        for what, base, old, new, token, msg in BAD:
            if base not in texts or old not in texts[base]:
                fail(f"{what}: '{old}' is not in {base}")
            bad = texts[base].replace(old, new)   # every occurrence
            desc = os.path.join(beside, "bad.yaml")
            open(desc, "w").write(bad)
            refused(tool, desc, bad, token, msg, tmp)
    print(f"ok: {len(descs)} shipped descriptions and {len(docs)} of the docs plan and load; "
          f"{len(budgets)} budget files named as such; {len(BAD)} bad descriptions refused at their place")
    return 0


if __name__ == "__main__":
    sys.exit(main())
