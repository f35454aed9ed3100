#!/usr/bin/env bash
# Fetches the Debian packages of cbf's C dependencies and unpacks them into
# .devdeps/, which the `device` tool carries to a GPU machine that has nvcc
# but no libyaml/HDF5/FFTW/cmocka and no network. Used only for that lent
# machine; CI and users install the same libraries with apt (scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
pkgs="libyaml-0-2 libyaml-dev libcmocka0 libcmocka-dev libfftw3-single3 libfftw3-double3
      libfftw3-dev libhdf5-103-1 libhdf5-dev libhdf5-hl-100 libsz2 libaec0 libzmq5
      libzmq3-dev libsodium23 libpgm-5.3-0 libnorm1 libjansson4 libjansson-dev
      libpcap0.8 libpcap0.8-dev libmicrohttpd12 libmicrohttpd-dev"
# libmicrohttpd12 needs libgnutls30, which is not carried: apt depends on it,
# so every Debian or Ubuntu machine has it.
tmp=$(mktemp -d)
(cd "$tmp" && apt-get download $pkgs >/dev/null)
rm -rf .devdeps && mkdir .devdeps
for f in "$tmp"/*.deb; do dpkg -x "$f" .devdeps; done
rm -rf "$tmp" .devdeps/usr/share/doc .devdeps/usr/share/man .devdeps/usr/share/lintian
find .devdeps -name '*.a' -delete
find .devdeps -name 'libfftw3[lq]*' -delete
ln -sf hdf5-serial.pc .devdeps/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5.pc
du -sh .devdeps
