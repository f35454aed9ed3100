#!/usr/bin/env python3
"""A narrowband plan cbf-array writes runs as it is and channelises where
it should: 2 antennas through a 1/8 ddc about 428 MHz into 256 channels
of 417.96875 kHz, one X-engine with 2 beams, a beam receiver and a
simulated digitiser with one tone, all on one host (127.0.0.1, the CPU),
each process `cbf-run FILE` in processes.tsv's order (array_plan_run.py's
run_plan).

Channel k of N covers centre + (k - N / 2) x bandwidth / N, channel 0 the
lowest frequency, so the tone at 428 MHz - 50 channels must be channel 78
(the mirror image, a band read upside down, would be 178) in every
product the X-engine records (autos and crosses of both pols: the
digitiser gives every input the same tone), at least 100 times any other
channel, nothing flagged or saturated; the recorded beams the same. The
X-engine's receiver takes spectra 2 x 256 x 8 = 4096 digitiser samples
apart (its samples_between_spectra), so its dumps say 107 MHz of band.

With --vlbi the description adds array.pass_bandwidth (80.25 MHz, 3/4 of
the band: katgpucbf's VLBI form): each F-engine's ddc subsamples by 16
with that pass band and keeps all 256 channels (none discarded), and the
tone, inside the pass band, must come out in the same channel with the
same band, spectra and beams.

usage: array_narrowband_run.py CBF_ARRAY CBF_RUN [--vlbi]
"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from array_plan_run import fail, run_plan  # noqa: E402  (exits 77 without h5py/numpy)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

RATE, DECIMATION, CHANNELS, CENTRE = 1712e6, 8, 256, 428e6
BANDWIDTH = RATE / 2 / DECIMATION
TONE_CHANNEL = CHANNELS // 2 - 50
TONE = CENTRE + (TONE_CHANNEL - CHANNELS // 2) * BANDWIDTH / CHANNELS

DESCRIPTION = """\
array:
  name: narrow2
  antennas: 2
  channels: {channels}
  xengines: 1
  decimation: {decimation}
  ddc_centre_frequency: {centre!r}
{vlbi}  beams: 2
  heaps_per_dump: 2
  gain: 0.02                 # the tone at about 67 counts, inside the 8-bit range
multicast:
  digitiser: 239.11.{net}.0:{port}
  feng: 239.11.{net}.16:{port2}
  beam: 239.11.{net}.32:{port3}
simulate:
  digitisers: 1
  length: 8388608
  noise: 0.05
  tone_hz: {tone!r}
  tone_amplitude: 0.2
  rate_gbps: 0.1
hosts:
  lo: {{roles: "digitiser, feng, xeng, beams", interfaces: 127.0.0.1, nic_gbps: 400}}
"""


def tone_alone(power, what):
    """power [..., channel]: every spectrum's largest channel is the tone's
    and at least 100 times the next."""
    top = power.argmax(axis=-1)
    if (top != TONE_CHANNEL).any():
        found = sorted(set(top.ravel().tolist()))
        mirror = " (the mirror image: the band upside down)" if CHANNELS - TONE_CHANNEL in found else ""
        fail(f"{what}: the tone at {TONE / 1e6} MHz peaks in channels {found}, want {TONE_CHANNEL}{mirror}")
    ranked = np.sort(power, axis=-1)
    worst = (ranked[..., -1] / np.maximum(ranked[..., -2], 1e-9)).min()
    if worst < 100:
        fail(f"{what}: channel {TONE_CHANNEL} only {worst:.1f} times the next channel")
    return worst


def main():
    cbf_array, cbf_run = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    vlbi = sys.argv[3:] == ["--vlbi"]
    pass_bw = 0.75 * BANDWIDTH
    base = 30000 + (os.getpid() % 1000) * 24
    with tempfile.TemporaryDirectory() as tmp:
        desc = os.path.join(tmp, "narrow2.yaml")
        with open(desc, "w") as f:
            f.write(DESCRIPTION.format(channels=CHANNELS, decimation=DECIMATION, centre=CENTRE, tone=TONE,
                                       vlbi=f"  pass_bandwidth: {pass_bw!r}\n" if vlbi else "",
                                       net=100 + os.getpid() % 100, port=base, port2=base + 16, port3=base + 20))
        plan = os.path.join(tmp, "plan")
        r = subprocess.run([cbf_array, desc, "--out", plan], capture_output=True, text=True)
        if r.returncode:
            fail(f"cbf-array exit {r.returncode}: {r.stdout}{r.stderr}")
        with open(os.path.join(plan, "feng0.yaml")) as f:
            feng = f.read()
        ddc = (f"decimation: {2 * DECIMATION}, pass_bandwidth: {pass_bw:.15g}}}" if vlbi
               else f"decimation: {DECIMATION}}}")
        if ddc not in feng:
            fail(f"feng0.yaml lacks the ddc's {ddc!r}:\n{feng}")
        names = run_plan(cbf_run, plan)
        if names != ["beams", "xeng0", "feng0", "feng1", "digitiser0"]:
            fail(f"processes.tsv lists {names}")
        vis = h5py.File(os.path.join(plan, "xeng0.h5"))["reduce"]
        if vis.attrs["bandwidth"] != BANDWIDTH or vis.attrs["samples_between_spectra"] != 2 * CHANNELS * DECIMATION:
            fail(f"X-engine: bandwidth {vis.attrs['bandwidth']}, samples_between_spectra "
                 f"{vis.attrs['samples_between_spectra']}; want {BANDWIDTH}, {2 * CHANNELS * DECIMATION}")
        data = vis["data"][()].astype(np.float64)            # [dump][channel][product][re_im]
        if len(data) < 2 or not vis["present"][()].all() or vis["saturated"][()].any():
            fail(f"X-engine: {len(data)} dumps, present {vis['present'][()].tolist()}, "
                 f"saturated {vis['saturated'][()].tolist()}")
        power = np.moveaxis((data ** 2).sum(axis=-1), 1, -1)  # [dump][product][channel]
        v = tone_alone(power, "visibilities")
        beams = h5py.File(os.path.join(plan, "beams.h5"))["recv"]
        if not beams["present"][()].all():
            fail(f"beams: flagged {np.argwhere(beams['present'][()] == 0).tolist()}")
        b = beams["data"][()].astype(np.float64)               # [chunk][batch][beam][channel][spectrum][re_im]
        b = tone_alone((b ** 2).sum(axis=-1).sum(axis=-1), "beams")
        print(f"ok: the {'VLBI (whole-band) ' if vlbi else ''}narrowband plan ran as written; the tone at {TONE / 1e6} MHz is channel {TONE_CHANNEL} "
              f"of {CHANNELS} about {CENTRE / 1e6} MHz in all {power.shape[1]} products of {len(data)} dumps "
              f"(at least {v:.3g} times any other channel) and in both beams (at least {b:.3g} times)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
