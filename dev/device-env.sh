# Source this on the lent GPU machine (see dev/fetch-device-deps.sh):
# points pkg-config, the linker and the loader at the carried .devdeps/.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
_lib="$_root/.devdeps/usr/lib/x86_64-linux-gnu"
export PKG_CONFIG_SYSROOT_DIR="$_root/.devdeps"
export PKG_CONFIG_LIBDIR="$_lib/pkgconfig:$_root/.devdeps/usr/share/pkgconfig"
# The loader gets only the carried libraries this machine lacks (links in
# .devdeps/missing): the bundle carries the whole closure (OpenSSL, Kerberos,
# curl...), and its Debian copies must not replace the image's own for the
# image's programs (python, meson) that run under this environment.
_miss="$_root/.devdeps/missing"
rm -rf "$_miss" && mkdir -p "$_miss"
_have=$( (ldconfig -p 2>/dev/null || /sbin/ldconfig -p) | awk '/=>/ {print $1}' | sort -u)
for _f in "$_lib"/*.so.*; do
    _n=${_f##*/}
    grep -qxF "$_n" <<<"$_have" || ln -s "$_f" "$_miss/$_n"
done
export LD_LIBRARY_PATH="$_miss${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The linker finds the carried development links (libpcap.so...) here.
export LIBRARY_PATH="$_lib:$_miss${LIBRARY_PATH:+:$LIBRARY_PATH}"
# Headers of libraries found without pkg-config (libzmq: meson.build).
export CPATH="$_root/.devdeps/usr/include${CPATH:+:$CPATH}"
export PATH="/usr/local/cuda/bin:$PATH"
# cuFFTDx's headers, which scripts/setup.sh fetches wherever nvcc is: the
# lent machine has no network, so they come packed in .devdeps
# (scripts/fetch-mathdx.sh) and go where meson looks by default.
if [ ! -f "$_root/.mathdx/nvidia/mathdx/include/cufftdx.hpp" ] && [ -f "$_root/.devdeps/mathdx.tar.xz" ]; then
    mkdir -p "$_root/.mathdx" && tar -xJf "$_root/.devdeps/mathdx.tar.xz" -C "$_root/.mathdx"
fi
unset _root _lib _miss _have _f _n
