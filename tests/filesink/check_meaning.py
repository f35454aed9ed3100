#!/usr/bin/env python3
"""Shipped pipelines (pipelines/*.yaml, shortened with --set) written by
filesink and read back with h5py as someone who did not make the file:
`bits` of every stored type, the frequency of every channel (checked
against where dsim's tones land in the data), input labels, bls_ordering
(checked against the visibilities: a product and its swapped pair are
conjugates, an input with itself is real and positive), the time
reference and the upstream stages; then scripts/cbf-describe on each file.
Exit 77 (skipped) without h5py/numpy or before cbf-run is built."""
import os
import subprocess
import sys
import tempfile

try:
    import h5py
    import numpy as np
except ImportError as e:
    print(f"skipped: {e.name} is not installed for {sys.executable}")
    sys.exit(77)

ROOT = os.environ.get("CBF_SOURCE_ROOT", os.path.join(os.path.dirname(__file__), "..", ".."))
cbf_run = os.path.join(os.environ.get("CBF_BUILD_ROOT", ""), "tools", "cbf-run")
if not os.access(cbf_run, os.X_OK):
    print("skipped: cbf-run is not built yet")
    sys.exit(77)
FS = 1712e6
failures = []


def check(ok, what):
    if not ok:
        failures.append(what)
        print("FAIL:", what)


def run(pipeline, sets, work):
    args = [cbf_run, os.path.join(ROOT, "pipelines", pipeline), "--quiet"]
    for s in sets:
        args += ["--set", s]
    r = subprocess.run(args, cwd=work, capture_output=True, text=True, timeout=240)
    assert r.returncode == 0, f"{pipeline}: {r.stdout}{r.stderr}"


def attr(g, name):
    v = g.attrs.get(name)
    return v.decode() if isinstance(v, bytes) else v


def strings(ds):
    return np.char.decode(ds[()]).tolist()


def common(g, what, bits, dtype):
    check(attr(g, "bits") == bits, f"{what}: bits {attr(g, 'bits')}, want {bits}")
    check(attr(g, "dtype") == dtype, f"{what}: dtype {attr(g, 'dtype')}")
    check(attr(g, "sync_time") == 0.0 and "no time reference" in (attr(g, "sync_time_note") or ""),
          f"{what}: sync_time {attr(g, 'sync_time')} / note {attr(g, 'sync_time_note')}")
    check(attr(g, "scale_factor_timestamp") == FS, f"{what}: scale_factor_timestamp")


def band(g, what, channels, first, count, centre, bw):
    """The attributes, and channel_frequency against centre + (c - N/2) bw / N
    computed here for the absolute channel c = first + index."""
    for name, want in [("channels", channels), ("first_channel", first), ("channel_count", count),
                       ("bandwidth", bw), ("centre_frequency", centre),
                       ("channel_width", bw / channels)]:
        check(attr(g, name) == want, f"{what}: {name} {attr(g, name)}, want {want}")
    c = np.arange(first, first + count, dtype=np.float64)
    want = centre + (c - channels / 2) * bw / channels
    f = g["channel_frequency"][()]
    # Same formula in float64 on both sides: equal to a few ulp of ~1e9 Hz.
    check(f.shape == (count,) and np.allclose(f, want, rtol=0, atol=1e-6),
          f"{what}: channel_frequency {f[:3]} .. vs {want[:3]} ..")


def strongest_channel_hz(g):
    d = g["data"][()].astype(np.float64)           # [buf][batch][chan][spec][pol][re_im]
    p = (d ** 2).sum(axis=-1).mean(axis=(0, 1, 3, 4))
    return g["channel_frequency"][int(np.argmax(p))], attr(g, "channel_width")


def upstream(g):
    return {k: (attr(v, "plugin"), int(v.attrs["hops"]),
                {n: a.decode() for n, a in v["params"].attrs.items()})
            for k, v in g["upstream"].items()}


def describe(path, wants):
    r = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "cbf-describe"), path],
                       capture_output=True, text=True)
    check(r.returncode == 0, f"cbf-describe {path}: {r.stderr}")
    for w in wants:
        check(w in r.stdout, f"cbf-describe {os.path.basename(path)} does not say {w!r}:\n{r.stdout}")


def xeng(work):
    """pipelines/xeng.yaml: fsim, 4 antennas, 64 channels -> visibilities."""
    path = os.path.join(work, "xeng.h5")
    labels = ["m000v", "m000h", "m001v", "m001h", "m002v", "m002h", "m003v", "m003h"]
    run("xeng.yaml", [f"sink.path={path}", "sink.input_labels=" + ",".join(labels)], work)
    with h5py.File(path) as f:
        g = f["reduce"]
        common(g, "xeng vis", 32, "ci32")
        band(g, "xeng vis", 64, 0, 64, FS / 4, FS / 2)
        check(strings(g["input_labels"]) == labels, f"input_labels {strings(g['input_labels'])}")
        bls = strings(g["bls_ordering"])
        check(len(bls) == 40 and all(len(p) == 2 for p in bls), f"bls_ordering shape {len(bls)}")
        v = g["data"][()]
        ok = g["present"][()].all(axis=1)
        v = v[ok].astype(np.float64)
        v = (v[..., 0] + 1j * v[..., 1]).sum(axis=0)   # [channel][product]
        index = {tuple(p): i for i, p in enumerate(bls)}
        check(len(index) == 40, "bls_ordering repeats a pair")
        for i, (x, y) in enumerate(bls):
            if x == y:
                check(np.all(v[:, i].imag == 0) and np.all(v[:, i].real > 0),
                      f"product {i} ({x}, {y}) is not a real positive autocorrelation")
            elif (y, x) in index:
                j = index[(y, x)]
                check(np.array_equal(v[:, i], np.conj(v[:, j])),
                      f"products {i} ({x}, {y}) and {j} ({y}, {x}) are not conjugates")
        # Baselines are grouped by their second antenna (katgpucbf's order).
        firsts = [p[1][:4] for p in bls[::4]]
        check(firsts == ["m000", "m001", "m001", "m002", "m002", "m002"] + ["m003"] * 4,
              f"baseline order by second antenna: {firsts}")
        up = upstream(g)
        check(up.get("fsim", (None, None))[:2] == ("fsim", 2) and up["reduce"][1] == 0,
              f"upstream {sorted(up)}")
    describe(path, ["visibilities", "channels 0 .. 63", "(m000h, m000v)", "sync_time 0",
                    "reduce (reducer) <- corr (correlator) <- fsim (fsim)"])


def feng(work):
    """pipelines/feng-wideband.yaml, 8- and 4-bit: the tone at 208984375 Hz
    must be the strongest channel, and that channel's frequency the tone's.
    At 4 bits the gain is 1/16 of the pipeline's, so that neither tone
    clips at 7 (both at 7 would leave the order to dither and noise)."""
    for bits in (8, 4):
        path = os.path.join(work, f"wide{bits}.h5")
        gain = "[0.02, 0]" if bits == 8 else "[0.00125, 0]"
        sets = [f"sink.path={path}", "dsim.length=4194304", f"fft_post.out_bits={bits}"]
        run("feng-wideband.yaml", sets + ([] if bits == 8 else [f"fft_post.gain={gain}"]), work)
        with h5py.File(path) as f:
            g = f["fft_post"]
            what = f"feng {bits}-bit"
            common(g, what, bits, "ci8" if bits == 8 else "ci4")
            band(g, what, 4096, 0, 4096, FS / 4, FS / 2)
            hz, width = strongest_channel_hz(g)
            check(abs(hz - 208984375.0) < width / 2, f"{what}: strongest channel at {hz} Hz")
            check(strings(g["input_labels"]) == ["ant0p0", "ant0p1"], f"{what}: input labels")
            check("bls_ordering" not in g, f"{what}: bls_ordering on a voltage stream")
            up = upstream(g)
            check(up["pfb"][2]["window"] == "hann" and up["pfb"][2]["taps"] == "16" and
                  up["fft_post"][2]["gain"] == gain, f"{what}: upstream {up}")
            check(attr(g, "adc_bits") is None or attr(g, "adc_bits") == 10, f"{what}: adc_bits")
        describe(path, ["F-engine channelised voltages", f"{bits} bits per component",
                        "window hann", f"gain {gain}", "0.000000 MHz .. 855.791016 MHz"])


def narrow(work):
    """pipelines/feng-wide-narrow.yaml: each narrowband file's strongest
    channel is its tone (frequencies from the ddc's centre), and the
    wideband branch's pfb output keeps the digitiser width as adc_bits."""
    sets = ["dsim.length=4194304", f"sink_wide.path={work}/w.h5"]
    for n in (1, 2):
        sets += [f"sink_narrow{n}.path={work}/n{n}.h5", f"pfb_narrow{n}.spectra_per_buffer=32",
                 f"post_narrow{n}.spectra_per_heap=32"]
    run("feng-wide-narrow.yaml", sets, work)
    for n, tone, centre, dec, ch in [(1, 327060546.875, 300.9375e6, 8, 4096),
                                     (2, 663525390.625, 668.75e6, 32, 1024)]:
        with h5py.File(f"{work}/n{n}.h5") as f:
            g = f[f"post_narrow{n}"]
            what = f"narrowband {n}"
            common(g, what, 8, "ci8")
            # The realised centre is mix_step fs / 2^32 (docs/formats.md, Narrowband).
            realised = round(centre / FS * 2**32) * FS / 2**32
            band(g, what, ch, 0, ch, realised, FS / (2 * dec))
            hz, width = strongest_channel_hz(g)
            check(abs(hz - tone) < width / 2, f"{what}: strongest channel at {hz} Hz, tone {tone}")
            check(upstream(g)[f"ddc{n}"][0] == "ddc", f"{what}: no ddc upstream")
        describe(f"{work}/n{n}.h5", ["DDC centre", f"decimation {dec}"])


def digitiser(work):
    """pipelines/dsim-to-hdf5.yaml: packed samples keep their width."""
    path = os.path.join(work, "dsim.h5")
    run("dsim-to-hdf5.yaml", [f"sink.path={path}", "dsim.length=2097152"], work)
    with h5py.File(path) as f:
        g = f["dsim"]
        common(g, "digitiser", 10, "packed")
        check(strings(g["input_labels"]) == ["ant0p0", "ant0p1", "ant1p0", "ant1p1"],
              "digitiser input labels")
        check("channel_frequency" not in g, "digitiser samples with channel frequencies")
    describe(path, ["digitiser samples", "10 bits per component", "ant1p1"])


def main():
    with tempfile.TemporaryDirectory(prefix="cbf-meaning-") as work:
        xeng(work)
        feng(work)
        narrow(work)
        digitiser(work)
    if failures:
        print(f"{len(failures)} checks failed")
        return 1
    print("ok: every file says its bits, frequencies, inputs, baselines, time reference and stages")
    return 0


if __name__ == "__main__":
    sys.exit(main())
