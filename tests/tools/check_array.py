#!/usr/bin/env python3
"""cbf-array on tests/tools/array/good.yaml and on copies of it with one
thing broken at a time.

- The good plan: exit 0, one pipeline per process (8 F-engines, 4
  X-engines, a beam receiver), processes.tsv in start order, multicast.tsv
  with every group once, and every pipeline loads as cbf-run loads it
  (array_load: cbf_graph_load with the real plugins).
- The same at decimation 16 (narrowband): a ddc before each pfb with the
  centre and decimation given, the X-engines' and beam receiver's
  samples_between_spectra, pipelines that load, and the F-engine and beam
  streams at a sixteenth of the wideband rates in multicast.tsv.
- The X-engines' receive window (array.rx_reorder_tol): the time given in
  heaps, at least 8, and held to 256 MiB of chunks, by default and at two
  other tolerances.
- Each kind of bad description: exit 2 and one line naming the file, the
  line and column of the offending key or value (found in the broken copy,
  not written down here), and what is wrong; nothing written.
- Over budget: a NIC (a host's nic_gbps lowered), a GPU (a budget whose
  feng_gsps is below two antennas) and PCIe (pcie_h2d_gbs below them):
  exit 1 naming the host, the NIC or GPU and the figure; nothing written.

usage: check_array.py CBF_ARRAY ARRAY_LOAD DIR (DIR holds good.yaml)"""
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
BUDGET = os.path.join(ROOT, "pipelines", "plans", "budget-h100.yaml")

# (what, old text, new text, token whose place the message must name, message regex)
BAD = [
    ("YAML syntax", "  beams: 2\n", "  beams: [2\n", "  heaps", r"YAML syntax error"),
    ("unknown section", "hosts:\n", "host:\n", "host:", r"unknown section 'host' \(did you mean 'hosts'\?\)"),
    ("missing section", "multicast:\n  digitiser: 239.20.0.0:7148\n  feng: 239.21.0.0:7148\n  beam: 239.22.0.0:7148\n",
     "", "array:", r"section 'multicast' is missing"),
    ("unknown key", "  antennas: 8", "  antenas: 8", "antenas", r"has no parameter 'antenas'; did you mean 'antennas'\?"),
    ("wrong type", "  antennas: 8", "  antennas: eight", "eight", r"parameter 'antennas'"),
    ("out of range", "  beams: 2", "  beams: 65", "65", r"parameter 'beams'"),
    ("missing key", "  channels: 4096\n", "", "  name: test8", r"parameter 'channels' is required"),
    ("bad group", "feng: 239.21.0.0:7148", "feng: 239.21.0.0", "239.21.0.0", r"multicast.feng: expected group:port"),
    ("not multicast", "beam: 239.22.0.0:7148", "beam: 10.22.0.0:7148", "10.22.0.0", r"not an IPv4 multicast group"),
    ("unknown role", "{roles: xeng, gpus: 2, interfaces: \"10.0.2.2", "{roles: xengine, gpus: 2, interfaces: \"10.0.2.2",
     "xengine,", r"host 'x1': unknown role 'xengine' \(did you mean 'xeng'\?\)"),
    ("bad interface", "10.0.1.2\"", "10.0.1.300\"", "\"10.0.0.2, 10.0.1.300\"", r"host 'f1': interfaces: '10.0.1.300'"),
    ("host key typo", "  b0: {roles: beams, interfaces", "  b0: {roles: beams, interface", "interface:",
     r"node 'b0': plugin 'cbf-array host' has no parameter 'interface'; did you mean 'interfaces'\?"),
    ("host twice", "  b0: {roles: beams", "  x0: {roles: beams", "x0: {roles: beams", r"host 'x0' is given twice"),
    ("xengines do not divide", "  xengines: 4", "  xengines: 3", "3", r"array.xengines: 3 does not divide the 4096"),
    ("budget missing", "budget: BUDGET", "budget: nowhere.yaml", "nowhere.yaml", r"array.budget: .*cannot open budget"),
    ("beam_pols count", "  beams: 2\n", "  beams: 2\n  beam_pols: [1]\n", "[1]",
     r"array.beam_pols: 1 given for 2 beams"),
    ("beam_pols range", "  beams: 2\n", "  beams: 2\n  beam_pols: [0, 2]\n", "2]", r"parameter 'beam_pols'"),
    ("input_streams count", "  beams: 2\n", "  beams: 2\n  input_streams: [0, 1]\n", "[0, 1]",
     r"array.input_streams: 2 given for 16 inputs"),
    ("record without vis", "  beams: 2\n", "  beams: 2\n  record: false\n", "false",
     r"array.record: false needs multicast.vis"),
    ("bad vis group", "  beam: 239.22.0.0:7148\n", "  beam: 239.22.0.0:7148\n  vis: 10.0.0.1:7148\n",
     "10.0.0.1:7148", r"multicast.vis: '10.0.0.1' is not an IPv4 multicast group"),
    ("bad control", "b0: {roles: beams, interfaces: 10.0.4.1,", "b0: {roles: beams, control: nowhere, "
     "interfaces: 10.0.4.1,", "nowhere", r"host 'b0': control: 'nowhere' is not an IPv4 address"),
    ("decimation not a power of two", "  beams: 2\n", "  beams: 2\n  decimation: 12\n  ddc_centre_frequency: 600e6\n",
     "12\n", r"array.decimation: 12 is not a power of two"),
    ("decimation out of range", "  beams: 2\n", "  beams: 2\n  decimation: 128\n  ddc_centre_frequency: 600e6\n",
     "128", r"parameter 'decimation'"),
    ("narrowband without a centre", "  beams: 2\n", "  beams: 2\n  decimation: 16\n", "16\n",
     r"array.decimation: 16 needs array.ddc_centre_frequency"),
    ("centre of a wideband array", "  beams: 2\n", "  beams: 2\n  ddc_centre_frequency: 600e6\n", "600e6",
     r"array.ddc_centre_frequency: given for a wideband array \(array.decimation 1\)"),
    ("narrowband below the band", "  beams: 2\n", "  beams: 2\n  decimation: 8\n  ddc_centre_frequency: 40e6\n",
     "40e6", r"array.ddc_centre_frequency: 40 MHz puts the 107 MHz narrowband \(array.decimation 8\) at "
     r"-13.5 \.\. 93.5 MHz, outside the digitiser's 0 \.\. 856 MHz \(the centre must lie in 53.5 \.\. 802.5 MHz\)"),
    ("narrowband above the band", "  beams: 2\n", "  beams: 2\n  decimation: 8\n  ddc_centre_frequency: 810e6\n",
     "810e6", r"array.ddc_centre_frequency: 810 MHz puts the 107 MHz narrowband \(array.decimation 8\) at "
     r"756.5 \.\. 863.5 MHz, outside"),
    ("VLBI pass band of a wideband array", "  beams: 2\n", "  beams: 2\n  pass_bandwidth: 64e6\n", "64e6",
     r"array.pass_bandwidth: given for a wideband array \(array.decimation 1\); VLBI's form is a narrowband one"),
    ("VLBI pass band as wide as the band", "  beams: 2\n",
     "  beams: 2\n  decimation: 8\n  ddc_centre_frequency: 600e6\n  pass_bandwidth: 107e6\n", "107e6",
     r"array.pass_bandwidth: 107 MHz is not under the narrowband's 107 MHz \(array.decimation 8\)"),
]


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def place(text, token):
    """line:column (1-based) of the first token in text."""
    i = text.index(token)
    line = text.count("\n", 0, i) + 1
    col = i - (text.rfind("\n", 0, i) + 1) + 1
    if token.startswith("  "):   # a whole line given: its key's column
        col += len(token) - len(token.lstrip())
    return f"{line}:{col}"


def run(cbf_array, desc, out):
    return subprocess.run([cbf_array, desc, "--out", out], capture_output=True, text=True)


def plan_ok(cbf_array, text, tmp, name):
    """Plans text saved as tmp/NAME.yaml into tmp/NAME; fails unless it plans."""
    desc = os.path.join(tmp, name + ".yaml")
    open(desc, "w").write(text)
    out = os.path.join(tmp, name)
    r = run(cbf_array, desc, out)
    if r.returncode:
        fail(f"{name}.yaml: exit {r.returncode}: {r.stdout}{r.stderr}")
    return out


def good_plan(cbf_array, array_load, text, tmp):
    out = plan_ok(cbf_array, text, tmp, "good")
    rows = [l.split("\t") for l in open(os.path.join(out, "processes.tsv")).read().splitlines()
            if not l.startswith("#")]
    names = [r[1] for r in rows]
    want = ["beams"] + [f"xeng{x}" for x in range(4)] + [f"feng{a}" for a in range(8)]
    if names != want or [r[0] for r in rows] != ["1"] + ["2"] * 4 + ["3"] * 8:
        fail(f"processes.tsv: {rows}")
    if [r[2] for r in rows[5:]] != ["f0"] * 4 + ["f1"] * 4 or [r[3] for r in rows[5:]] != list("00110011"):
        fail(f"F-engines placed {[(r[2], r[3]) for r in rows[5:]]}, want 2 a GPU over f0 and f1")
    groups = [l.split("\t")[1] for l in open(os.path.join(out, "multicast.tsv")).read().splitlines()
              if not l.startswith("#")]
    if len(groups) != 16 + 4 + 2 or len(set(groups)) != len(groups):
        fail(f"multicast.tsv: {groups}")
    files = sorted(os.path.join(out, n + ".yaml") for n in names)
    r = subprocess.run([array_load] + files, capture_output=True, text=True)
    if r.returncode:
        fail(f"generated pipelines do not load: {r.stdout}{r.stderr}")
    feng5 = open(os.path.join(out, "feng5.yaml")).read()
    for want_text in ("address: 239.20.0.10:7158,239.20.0.11:7159", "interface: 10.0.0.2", "gpu_device: 0",
                      "feng_id: 5", 'destinations: "239.21.0.0:7148,239.21.0.1:7149,239.21.0.2:7150,'
                      '239.21.0.3:7151"'):
        if want_text not in feng5:
            fail(f"feng5.yaml lacks '{want_text}':\n{feng5}")
    return len(names)


def xeng_window(text, tol):
    """The window xeng0.yaml should carry: tol seconds in heaps of good.yaml's
    array, at least 8, at most 256 MiB of chunks (each antennas x the
    X-engine's channels x spectra per heap x 4 bytes)."""
    ants = int(re.search(r"antennas: (\d+)", text).group(1))
    chans = int(re.search(r"channels: (\d+)", text).group(1))
    xengs = int(re.search(r"xengines: (\d+)", text).group(1))
    m = re.search(r"spectra_per_heap: (\d+)", text)
    spectra, rate = int(m.group(1)) if m else 256, 1712e6   # cbf-array's defaults
    heap_s = spectra * 2 * chans / rate
    cap = (256 << 20) // (ants * chans // xengs * spectra * 4)
    return max(8, min(math.ceil(tol / heap_s - 1e-9), cap))


def window_plans(cbf_array, array_load, text, tmp):
    """array.rx_reorder_tol sets each X-engine receiver's chunks_in_flight,
    and the receiver takes it (a window of 4096 heaps, the most, loads)."""
    for tol in (None, 0.02, 0.001, 5.0):
        t = text if tol is None else text.replace("  xengines: 4\n", f"  xengines: 4\n  rx_reorder_tol: {tol}\n", 1)
        if tol == 5.0:   # small chunks, so that the time and not the 256 MiB sets the window
            t = t.replace("  channels: 4096\n", "  channels: 256\n  spectra_per_heap: 32\n", 1)
        out = plan_ok(cbf_array, t, tmp, "window")
        want = xeng_window(t, 0.3136 if tol is None else tol)
        x0 = open(os.path.join(out, "xeng0.yaml")).read()
        got = re.search(r"chunks_in_flight: (\d+)\n\s+buffers: (\d+)", x0)
        if not got or (int(got.group(1)), int(got.group(2))) != (want, want + 2):
            fail(f"rx_reorder_tol {tol}: xeng0.yaml's window {got and got.groups()}, want {want} chunks, {want + 2} buffers")
        r = subprocess.run([array_load, os.path.join(out, "xeng0.yaml")], capture_output=True, text=True)
        if r.returncode:
            fail(f"rx_reorder_tol {tol}: xeng0.yaml does not load: {r.stdout}{r.stderr}")
        print(f"ok: rx_reorder_tol {tol}: {want} chunks in flight, and xeng0.yaml loads")
        shutil.rmtree(out)


def same_port_plan(cbf_array, text, tmp):
    """multicast.same_port: every group of a stream on its first port
    (katgpucbf's a.b.c.d+N:port), in the pipelines and multicast.tsv."""
    desc = os.path.join(tmp, "same.yaml")
    open(desc, "w").write(re.sub(r"(\n  feng: 239\.21\.0\.0:7148)", r"\1\n  same_port: true", text, count=1))
    out = os.path.join(tmp, "same")
    r = run(cbf_array, desc, out)
    if r.returncode:
        fail(f"same_port: exit {r.returncode}: {r.stdout}{r.stderr}")
    feng5 = open(os.path.join(out, "feng5.yaml")).read()
    for want_text in ("address: 239.20.0.10:7148,239.20.0.11:7148",
                      'destinations: "239.21.0.0:7148,239.21.0.1:7148,239.21.0.2:7148,239.21.0.3:7148"'):
        if want_text not in feng5:
            fail(f"same_port: feng5.yaml lacks '{want_text}':\n{feng5}")
    rows = [l.split("\t") for l in open(os.path.join(out, "multicast.tsv")).read().splitlines()
            if not l.startswith("#")]
    groups = [row[1] for row in rows]
    if len(set(groups)) != len(groups):
        fail(f"same_port: multicast.tsv repeats a group: {groups}")
    print("ok: multicast.same_port: every group of a stream on its first port")


def tsv_rates(path):
    """{stream: Gb/s} of a multicast.tsv."""
    rows = [l.split("\t") for l in open(path).read().splitlines() if not l.startswith("#")]
    return {row[0]: float(row[4]) for row in rows}


def narrowband_plan(cbf_array, array_load, text, tmp):
    """The good description at decimation 16 about 600 MHz: each F-engine
    gets a ddc before its pfb (centre and decimation as given, the pfb
    channelising its complex output), the X-engines' and the beam
    receiver's receivers take spectra 2 x 4096 x 16 samples apart, every
    pipeline loads, and multicast.tsv gives the F-engine and beam streams a
    sixteenth of the wideband plan's rates, the digitisers' unchanged."""
    old = "  beams: 2\n"
    desc = os.path.join(tmp, "narrow.yaml")
    open(desc, "w").write(text.replace(old, old + "  decimation: 16\n  ddc_centre_frequency: 600e6\n", 1))
    out = os.path.join(tmp, "narrow")
    r = run(cbf_array, desc, out)
    if r.returncode:
        fail(f"narrowband: exit {r.returncode}: {r.stdout}{r.stderr}")
    feng5 = open(os.path.join(out, "feng5.yaml")).read()
    for want_text in ("  ddc: {plugin: ddc, params: {centre_frequency: 600000000, decimation: 16}}\n",
                      "  pfb: {plugin: pfb, params: {channels: 4096, taps: ",
                      "edges:\n  - recv.out -> ddc.in\n  - ddc.out -> pfb.in\n  - pfb.out -> post.in\n"):
        if want_text not in feng5:
            fail(f"narrowband: feng5.yaml lacks '{want_text}':\n{feng5}")
    for name in ("xeng2", "beams"):
        got = open(os.path.join(out, name + ".yaml")).read()
        if "      samples_between_spectra: 131072\n" not in got:
            fail(f"narrowband: {name}.yaml's receiver lacks samples_between_spectra: 131072:\n{got}")
    files = sorted(os.path.join(out, n) for n in os.listdir(out) if n.endswith(".yaml"))
    r = subprocess.run([array_load] + files, capture_output=True, text=True)
    if r.returncode:
        fail(f"narrowband: the pipelines do not load: {r.stdout}{r.stderr}")
    wide, narrow = tsv_rates(os.path.join(tmp, "good", "multicast.tsv")), tsv_rates(os.path.join(out, "multicast.tsv"))
    for stream, rate in wide.items():
        want = rate if stream.startswith("digitiser") else rate / 16
        if stream not in narrow or abs(narrow[stream] - want) > 0.006:
            fail(f"narrowband: multicast.tsv gives {stream} {narrow.get(stream)} Gb/s, want {want:.3f} "
                 f"(wideband {rate})")
    print(f"ok: narrowband: a ddc (600 MHz, 16) before each pfb, spectra 131072 samples apart at the X-engines "
          f"and the beam receiver, {len(files)} pipelines load, F-engine and beam rates / 16")


def main():
    cbf_array, array_load, src = sys.argv[1:4]
    text = open(os.path.join(src, "good.yaml")).read()
    text = re.sub(r"budget: .*", f"budget: {BUDGET}", text)
    with tempfile.TemporaryDirectory() as tmp:
        n = good_plan(cbf_array, array_load, text, tmp)
        same_port_plan(cbf_array, text, tmp)
        window_plans(cbf_array, array_load, text, tmp)
        narrowband_plan(cbf_array, array_load, text, tmp)
        for what, old, new, token, msg in BAD:
            old = old.replace("BUDGET", BUDGET)
            if old not in text:
                fail(f"{what}: '{old}' is not in good.yaml")
            bad = text.replace(old, new, 1)
            desc = os.path.join(tmp, "bad.yaml")
            open(desc, "w").write(bad)
            out = os.path.join(tmp, "bad-out")
            r = run(cbf_array, desc, out)
            where = f"{desc}:{place(bad, token)}: "
            if what == "YAML syntax":   # libyaml names where it noticed, a line later
                where = f"{desc}:"
            if r.returncode != 2 or where not in r.stderr or not re.search(msg, r.stderr) or os.path.exists(out):
                fail(f"{what}: want exit 2 and '{where}...{msg}', nothing written; got exit {r.returncode}: "
                     f"{r.stderr.strip()}")
            print(f"ok: {what}: {r.stderr.strip()}")
        over = [
            ("NIC", text.replace("\"10.0.0.2, 10.0.1.2\", nic_gbps: 100", "\"10.0.0.2, 10.0.1.2\", nic_gbps: 75"),
             None, r"host 'f1': NIC 10.0.0.2 receives 70.33 Gb/s, more than 67.50 Gb/s"),
            ("GPU", text, ("feng_gsps: 33.46", "feng_gsps: 7"),
             r"host 'f0': GPU 0: its engines need 0.978 of the GPU, more than array.fill 0.9 "
             r"\(F-engines 6.85 Gsample/s of feng_gsps 7 at .*budget.yaml:\d+:\d+"),
            ("PCIe", text, ("pcie_h2d_gbs: 43.53", "pcie_h2d_gbs: 9"),
             r"host 'f0': GPU 0: PCIe host to GPU 8.56 GB/s, more than 8.10 \(pcie_h2d_gbs 9 at"),
        ]
        for what, desc_text, budget_edit, msg in over:
            if budget_edit:
                b = open(BUDGET).read()
                if budget_edit[0] not in b:
                    fail(f"{what}: '{budget_edit[0]}' is not in {BUDGET}")
                bpath = os.path.join(tmp, "budget.yaml")
                open(bpath, "w").write(b.replace(*budget_edit))
                desc_text = desc_text.replace(f"budget: {BUDGET}", f"budget: {bpath}")
            desc = os.path.join(tmp, "over.yaml")
            open(desc, "w").write(desc_text)
            out = os.path.join(tmp, "over-out")
            r = run(cbf_array, desc, out)
            if r.returncode != 1 or not re.search(msg, r.stderr) or os.path.exists(out):
                fail(f"over-budget {what}: want exit 1 and '{msg}', nothing written; got exit "
                     f"{r.returncode}: {r.stdout}{r.stderr}")
            print(f"ok: over-budget {what}: {r.stderr.strip()}")
    print(f"ok: the good plan ({n} processes) loads; {len(BAD)} bad descriptions and 3 over-budget plans refused")
    return 0


if __name__ == "__main__":
    sys.exit(main())
