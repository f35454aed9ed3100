#!/usr/bin/env bash
# Fetches the Debian packages of cbf's C dependencies and unpacks them into
# .devdeps/, which the `device` tool carries to a GPU machine that has nvcc
# but no libyaml/HDF5/FFTW/cmocka and no network. Used only for that lent
# machine; CI and users install the same libraries with apt (scripts/setup.sh).
#
# What that machine has: a bare Debian/Ubuntu image with CUDA, i.e. the
# Essential packages and apt with all they depend on (libc, libstdc++, zlib,
# libgnutls30, libsystemd0...). The runtime libraries carried are every
# library cbf links with its whole dependency closure less that base,
# computed from apt's lists by dev/devdeps.py (libpcap's libdbus-1-3 was
# missed by a list written by hand). The -dev packages below give headers and
# the pkg-config files meson reads, with those their .pc files require
# (libpcap's needs dbus-1, libibverbs's libnl): without one, meson builds
# the feature out silently. Usage: fetch-device-deps.sh [BUILD], BUILD (default
# build-cpu, if there) being a build whose libraries the bundle is checked to
# cover.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-cpu}
runtime=$(dev/devdeps.py list)
dev="libyaml-dev libcmocka-dev libfftw3-dev libhdf5-dev libzmq3-dev libjansson-dev
     libpcap0.8-dev libdbus-1-dev libmicrohttpd-dev libibverbs-dev libnl-3-dev
     libnl-route-3-dev"
echo "carrying: $(echo $runtime)"
tmp=$(mktemp -d)
# Downloaded as the caller into a folder of its own (apt's _apt user cannot
# write there and would warn).
(cd "$tmp" && apt-get -o APT::Sandbox::User="$(id -un)" download $runtime $dev >/dev/null)
rm -rf .devdeps && mkdir .devdeps
for f in "$tmp"/*.deb; do dpkg -x "$f" .devdeps; done
rm -rf "$tmp" .devdeps/usr/share/doc .devdeps/usr/share/man .devdeps/usr/share/lintian
find .devdeps -name '*.a' -delete
find .devdeps -name 'libfftw3[lq]*' -delete
# Debian 12 puts some libraries in /lib (usrmerge is the machine's business):
# one directory for the loader and the linker.
if [ -d .devdeps/lib/x86_64-linux-gnu ]; then
    cp -a .devdeps/lib/x86_64-linux-gnu/. .devdeps/usr/lib/x86_64-linux-gnu/
    rm -rf .devdeps/lib
fi
# Development links written absolute (libdbus-1.so -> /lib/...) would point
# outside the bundle: their targets now lie beside them.
find .devdeps -type l -lname '/*' | while read -r l; do
    ln -sf "$(basename "$(readlink "$l")")" "$l"
done
ln -sf hdf5-serial.pc .devdeps/usr/lib/x86_64-linux-gnu/pkgconfig/hdf5.pc
du -sh .devdeps
if [ -d "$build" ]; then
    dev/devdeps.py check "$build" --bundle .devdeps
else
    echo "no $build: the bundle not checked against a build (dev/devdeps.py check BUILD --bundle .devdeps)"
fi
