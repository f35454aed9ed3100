#!/usr/bin/env bash
# Fetches NVIDIA's cuFFTDx headers (PyPI wheel nvidia-mathdx, header-only)
# for fft_post's fused FFT + post kernel and cbf-bench's cuFFTDx kernels
# (meson option cufftdx); scripts/setup.sh runs it wherever nvcc is.
# Unpacks what cuFFTDx needs (cufftdx, commondx and the CUTLASS headers they
# include: 119 MB) into .mathdx/, meson's default mathdx_dir, and, where
# .devdeps/ exists, packs the same files as .devdeps/mathdx.tar.xz (about
# 7 MB) for the lent GPU machine, which has no network (dev/device-env.sh
# unpacks it).
# Usage: fetch-mathdx.sh [PIP] (default: build-venv/bin/pip, else pip3).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=25.6.0
pip=${1:-$( [ -x build-venv/bin/pip ] && echo build-venv/bin/pip || echo pip3 )}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download -q --no-deps -d "$tmp" "nvidia-mathdx==$VERSION"
rm -rf .mathdx && mkdir .mathdx
# A wheel is a zip; Python's zipfile unpacks it (no unzip on a bare Debian).
python3 - "$tmp"/nvidia_mathdx-"$VERSION"-*.whl "$VERSION" <<'PY'
import sys, zipfile
keep = ("nvidia/mathdx/include/cufftdx.hpp", "nvidia/mathdx/include/cufftdx/",
        "nvidia/mathdx/include/commondx/", "nvidia/mathdx/external/cutlass/include/",
        "nvidia_mathdx-%s.dist-info/licenses/" % sys.argv[2])
with zipfile.ZipFile(sys.argv[1]) as z:
    z.extractall(".mathdx", [n for n in z.namelist() if n.startswith(keep)])
PY
if [ -d .devdeps ]; then
    (cd .mathdx && tar -cJf ../.devdeps/mathdx.tar.xz nvidia nvidia_mathdx-"$VERSION".dist-info)
    du -sh .devdeps/mathdx.tar.xz
fi
du -sh .mathdx
