#!/usr/bin/python3
"""The strongest channels of F-engine output written by filesink, per
polarisation, with each channel's sky frequency: a quick look that the
dsim's tones landed where the frequency plan says.

usage: feng-channels.py FILE.h5 [--top 4] [--pipeline PIPELINE.yaml]

Every HDF5 group whose data has a 'channel' axis is read (one per fft_post
output edge). Power is the mean of re^2 + im^2 over the spectra of present
batches. Channels are `bandwidth / channels` wide; wideband channel k is
centred on k widths (channel 0 is DC: docs/formats.md, "Channel order"),
narrowband channel k on
centre_frequency + (k - channels / 2) widths (docs/narrowband.md). With --pipeline, each dsim tone is listed with
the channel that plan puts it in."""
import argparse

import h5py
import numpy as np
import yaml


def tones_from(pipeline):
    with open(pipeline) as f:
        pipe = yaml.safe_load(f)
    for node in (pipe.get("nodes") or {}).values():
        if node.get("plugin") == "dsim":
            return [float(t["frequency"]) for t in node.get("params", {}).get("tones", [])]
    return []


def report(name, g, top, tones):
    data = g["data"]
    axes = [a.decode() if isinstance(a, bytes) else a for a in data.attrs["axes"]]
    present = g["present"][()].astype(bool)
    vals = data[()].astype(np.float64)
    # [time][batch][channel][spectrum][pol][re_im] -> keep present batches.
    vals = vals[present]
    power = (vals ** 2).sum(axis=-1).mean(axis=(0, 2))  # [channel][pol]
    channels = int(g.attrs["channels"])
    width = float(g.attrs["bandwidth"]) / channels
    if "centre_frequency" in g.attrs:
        # Narrowband: channel N/2 is the band centre, channel 0 the lowest.
        low = float(g.attrs["centre_frequency"]) - channels // 2 * width
    else:
        low = 0.0
    print(f"{name}: {channels} channels of {width / 1e3:.3f} kHz, "
          f"{int(present.sum())} present batches of {vals.shape[2]} spectra "
          f"(axes {', '.join(axes)})")
    for f in tones:
        k = (f - low) / width
        where = f"channel {k:.2f}" if 0 <= k < channels else "outside the band"
        print(f"  dsim tone {f / 1e6:.6f} MHz -> {where}")
    print("  | pol | channel | centre MHz | rms counts |")
    print("  | --- | --- | --- | --- |")
    for p in range(power.shape[1]):
        for k in np.argsort(power[:, p])[::-1][:top]:
            print(f"  | {p} | {k} | {(low + k * width) / 1e6:.6f} | {np.sqrt(power[k, p]):.2f} |")
    rest = np.delete(power, np.argsort(power.max(axis=1))[::-1][:top], axis=0)
    print(f"  other channels: rms {np.sqrt(rest.mean()):.3f} counts")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("h5")
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--pipeline")
    a = ap.parse_args()
    tones = tones_from(a.pipeline) if a.pipeline else []
    found = False
    with h5py.File(a.h5, "r") as f:
        for name, g in f.items():
            if isinstance(g, h5py.Group) and "data" in g and "axes" in g["data"].attrs:
                axes = [x.decode() if isinstance(x, bytes) else x for x in g["data"].attrs["axes"]]
                if "channel" in axes and "spectrum" in axes:
                    report(name, g, a.top, tones)
                    found = True
    if not found:
        raise SystemExit(f"{a.h5}: no F-engine output (a group with channel and spectrum axes)")


if __name__ == "__main__":
    main()
