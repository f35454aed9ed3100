#!/usr/bin/python3
"""Amplitude and phase of each baseline at the demo tone's channel, from an
X-engine HDF5 file written by filesink (a reducer's visibilities), next to
the phase the digitiser simulator's delays predict.

usage: xeng-phases.py FILE.h5 [--pipeline pipelines/demo.yaml]

The tone frequency and delays are read from the pipeline YAML (its dsim
node); the channels the file holds (first channel, count, of how many),
the sample rate and the antennas from the file, so an X-engine that holds a
channel range (the array's second X-engine, first_channel 512) is read at
the right index; the pipeline's pfb gives the band's channels only for
files written before filesink recorded them. Baseline (a1, a2), product aa:
phase of x(a1) conj(x(a2)) = 360 (d2 - d1) k / (2 channels) degrees for a
tone in channel k (docs/formats.md, "Delay and phase"). Magic values (-2^31, 1) mark
dumps in which an antenna missed data; those dumps are listed, not used."""
import argparse
import math
import os
import sys

import h5py
import numpy as np
import yaml

MAGIC = (-2**31, 1)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("h5")
    # pipelines/ beside scripts/, in the source tree and installed (PREFIX/share/cbf).
    ap.add_argument("--pipeline", default=os.path.normpath(os.path.join(
        os.path.dirname(os.path.realpath(__file__)), "..", "pipelines", "demo.yaml")))
    a = ap.parse_args()
    with open(a.pipeline) as f:
        pipe = yaml.safe_load(f)
    nodes = pipe["nodes"]
    dsim = next(n["params"] for n in nodes.values() if n["plugin"] == "dsim")
    pfb = next((n["params"] for n in nodes.values() if n["plugin"] == "pfb"), {})
    tone = float(dsim["tones"][0]["frequency"])
    delays = [float(d) for d in dsim.get("delays", [])]

    with h5py.File(a.h5, "r") as f:
        group = next((g for g in f.values() if g.attrs.get("producer_plugin") in
                      ("reducer", b"reducer")), None)
        if group is None:
            sys.exit(f"{a.h5}: no group written by a reducer")
        vis = group["data"][...]  # [dump, channel, baseline x 4, re_im]
        ts = group["timestamp"][...]
        at = group.attrs
        fs = float(at.get("adc_sample_rate", dsim.get("adc_sample_rate", 1712e6)))
        channels = int(at.get("channels", pfb.get("channels", 4096)))
        first = int(at.get("first_channel", 0))
        labels = ([x.decode() for x in group["input_labels"][()]]
                  if "input_labels" in group else None)
    held = vis.shape[1]
    k = int(round(tone / (fs / 2 / channels)))
    if not first <= k < first + held:
        sys.exit(f"{a.h5}: the tone ({tone / 1e6:.6f} MHz) is in channel {k}, and this file holds "
                 f"channels {first} .. {first + held - 1} of {channels}")
    n_bl = vis.shape[2] // 4
    n_ants = int((math.isqrt(8 * n_bl + 1) - 1) // 2)
    if not delays:
        delays = [0.0] * n_ants
    print(f"{vis.shape[0]} dumps, {n_ants} antennas, channels {first} .. {first + held - 1} of "
          f"{channels}; tone {tone / 1e6:.6f} MHz in channel {k}; delays {delays} samples")
    good = []
    for i in range(vis.shape[0]):
        magic = np.all(vis[i, k - first, :, :] == MAGIC, axis=-1).reshape(n_bl, 4)
        if magic.any():
            print(f"dump {i} (timestamp {ts[i]}): {magic.all(axis=1).sum()} of {n_bl} baselines "
                  f"flagged missing (magic value), skipped")
        else:
            good.append(i)
    if not good:
        sys.exit("no dump without missing data")
    v = vis[good, k - first, :, :].astype(np.float64)
    v = (v[..., 0] + 1j * v[..., 1]).sum(axis=0)  # [baseline x 4]
    print("\n| a1 | a2 | amplitude (aa) | coherence | phase deg | expected deg |"
          + (" inputs |" if labels else ""))
    print("| --- | --- | --- | --- | --- | --- |" + (" --- |" if labels else ""))
    def bl(a1, a2):
        return a2 * (a2 + 1) // 2 + a1
    for a2 in range(n_ants):
        for a1 in range(a2):
            x = v[4 * bl(a1, a2)]
            auto = math.sqrt(v[4 * bl(a1, a1)].real * v[4 * bl(a2, a2)].real)
            expect = 360.0 * (delays[a2] - delays[a1]) * k / (2 * channels)
            expect = (expect + 180.0) % 360.0 - 180.0
            print(f"| {a1} | {a2} | {abs(x):.4g} | {abs(x) / auto if auto else 0:.3f} | "
                  f"{math.degrees(np.angle(x)):.1f} | {expect:.1f} |"
                  + (f" {labels[2 * a1]} x {labels[2 * a2]} |" if labels else ""))


if __name__ == "__main__":
    main()
