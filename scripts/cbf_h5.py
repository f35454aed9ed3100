"""Reading cbf HDF5 files (written by filesink) by what they say about
themselves: shared by scripts/cbf-describe (words) and scripts/cbf-plot
(pictures). The attributes and datasets are listed in
plugins/filesink/README.md and docs/formats.md ("HDF5 files")."""
import math

import h5py
import numpy as np

KIND = {
    "cbf.adc.packed": "digitiser samples",
    "cbf.ddc.complex": "narrowband (DDC) complex samples",
    "cbf.feng.fir": "PFB FIR output (before the FFT)",
    "cbf.feng.fir.complex": "narrowband PFB FIR output (before the FFT)",
    "cbf.feng.spectra": "F-engine channelised voltages",
    "cbf.xeng.batch": "X-engine input: channelised voltages of every antenna",
    "cbf.xeng.accum": "X-engine correlator accumulators (int64, before the dump)",
    "cbf.xeng.vis": "X-engine visibilities (correlation products)",
    "cbf.beam.batch": "tied-array beams (beamformer output, or a beam stream received)",
    "cbf.feng.gains": "F-engine gain tables, each from the timestamp it took effect",
    "cbf.feng.delays": "F-engine delay models, each from the timestamp it took effect",
}

# A baseline of a dump in which an antenna missed data holds this (re, im)
# in every product (docs/formats.md, "X-engine stream").
MISSING = (-2**31, 1)


class NotCbf(Exception):
    """The file is not HDF5, or holds no group filesink wrote."""


def text(v):
    if isinstance(v, (bytes, np.bytes_)):
        return v.decode()
    if isinstance(v, np.ndarray) and v.dtype.kind == "S":
        return np.char.decode(v).tolist()
    return v


def attr(obj, name, default=None):
    return text(obj.attrs[name]) if name in obj.attrs else default


def mhz(hz):
    return "unknown" if hz is None or math.isnan(hz) else f"{hz / 1e6:.6f} MHz"


def count(n, word):
    return f"{n} {word}{'' if n == 1 else 's'}"


def open_file(path):
    """h5py.File, or NotCbf saying why it cannot be one."""
    try:
        return h5py.File(path, "r")
    except OSError as e:
        raise NotCbf(f"{path}: not a readable HDF5 file ({e})") from None


def time_reference(g):
    """(sync_time, samples per second) of a group, or None when the engine
    that wrote it had no time reference (engine key sync_time): then
    timestamps count samples from an arbitrary sample 0."""
    if "sync_time_note" in g.attrs or "sync_time" not in g.attrs:
        return None
    rate = attr(g, "scale_factor_timestamp")
    return (float(g.attrs["sync_time"]), float(rate)) if rate else None


def unix_time(g, timestamp):
    """UNIX seconds of a timestamp (digitiser samples) of group g:
    sync_time + timestamp / scale_factor_timestamp (docs/control.md, "Time").
    A float64 holds about 0.2 us at today's UNIX times: for sample-exact
    work keep timestamps, and convert only to show or compare with clocks.
    ValueError when the file has no time reference."""
    ref = time_reference(g)
    if ref is None:
        raise ValueError(f"{g.name}: no time reference (the engine had no sync_time)")
    sync, rate = ref
    return sync + np.asarray(timestamp, dtype=np.float64) / rate


def data_groups(f):
    """Names of the groups filesink wrote (a `data` dataset and a `type`
    attribute); NotCbf when there are none."""
    names = [k for k, v in f.items()
             if isinstance(v, h5py.Group) and "data" in v and "type" in v.attrs]
    if not names:
        raise NotCbf(f"{f.filename}: no group with data and a `type` attribute "
                     "(is this a cbf filesink file?)")
    return names


def axes(g):
    return text(g["data"].attrs.get("axes", np.array([], "S1")))


def input_labels(g):
    return text(g["input_labels"][()]) if "input_labels" in g else None


def products(g):
    """(first input index, second input index) of every product in data
    order, from bls_ordering and input_labels."""
    labels = input_labels(g)
    where = {x: i for i, x in enumerate(labels)}
    return [(where[a], where[b]) for a, b in np.reshape(text(g["bls_ordering"][()]), (-1, 2))]


def frequencies(g):
    """Centre frequency of each channel the group holds (Hz; NaN where the
    file does not know the band) and the band channel of index 0."""
    return g["channel_frequency"][()], int(attr(g, "first_channel", 0))


def antenna_present(g, row, n_ants):
    """[antenna] bool: the antenna had all its data in this row (flags per
    antenna, or per (batch, antenna))."""
    p = g["present"][row]
    if attr(g, "present_axis") in ("antenna", "batch_antenna") and p.size % n_ants == 0:
        return p.reshape(-1, n_ants).all(axis=0)
    return np.full(n_ants, bool(p.all()))


def unpack(raw, bits, n=None):
    """Signed samples from packed bytes (big-endian bit stream, docs/formats.md
    "Packed samples"), the first n of them (all when None), along the last
    axis."""
    total = raw.shape[-1] * 8 // bits
    n = total if n is None else min(n, total)
    raw = raw[..., :(n * bits + 7) // 8]
    b = np.unpackbits(raw, axis=-1)[..., :n * bits].reshape(*raw.shape[:-1], n, bits)
    weights = 1 << np.arange(bits - 1, -1, -1, dtype=np.int64)
    weights[0] = -weights[0]          # two's complement: the top bit counts negative
    return b.astype(np.int64) @ weights
