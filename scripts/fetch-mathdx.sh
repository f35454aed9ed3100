#!/usr/bin/env bash
# Fetches NVIDIA's cuFFTDx headers (PyPI wheel nvidia-mathdx, header-only)
# for the optional issue 17 measurement kernels (meson option cufftdx,
# `cbf-bench feng --dx`). Unpacks what cuFFTDx needs (cufftdx, commondx and
# the CUTLASS headers they include; 122 MB unpacked for the whole wheel)
# into .mathdx/, meson's default mathdx_dir, and, where .devdeps/ exists,
# packs the same files as .devdeps/mathdx.tar.xz (about 8 MB) for the lent
# GPU machine, which has no network (dev/device-feng-dx.sh unpacks it).
# Usage: fetch-mathdx.sh [PIP] (default: build-venv/bin/pip, else pip3).
set -euo pipefail
cd "$(dirname "$0")/.."
VERSION=25.6.0
pip=${1:-$( [ -x build-venv/bin/pip ] && echo build-venv/bin/pip || echo pip3 )}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$pip" download -q --no-deps -d "$tmp" "nvidia-mathdx==$VERSION"
keep="nvidia/mathdx/include/cufftdx.hpp nvidia/mathdx/include/cufftdx/*
      nvidia/mathdx/include/commondx/* nvidia/mathdx/external/cutlass/include/*
      nvidia_mathdx-$VERSION.dist-info/licenses/*"
rm -rf .mathdx && mkdir .mathdx
(cd .mathdx && unzip -q "$tmp"/nvidia_mathdx-"$VERSION"-*.whl $keep)
if [ -d .devdeps ]; then
    (cd .mathdx && tar -cJf ../.devdeps/mathdx.tar.xz nvidia nvidia_mathdx-"$VERSION".dist-info)
    du -sh .devdeps/mathdx.tar.xz
fi
du -sh .mathdx
