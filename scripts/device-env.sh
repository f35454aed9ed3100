# Source this on the lent GPU machine (see scripts/fetch-device-deps.sh):
# points pkg-config, the linker and the loader at the carried .devdeps/.
_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
export PKG_CONFIG_SYSROOT_DIR="$_root/.devdeps"
export PKG_CONFIG_LIBDIR="$_root/.devdeps/usr/lib/x86_64-linux-gnu/pkgconfig:$_root/.devdeps/usr/share/pkgconfig"
export LD_LIBRARY_PATH="$_root/.devdeps/usr/lib/x86_64-linux-gnu${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export LIBRARY_PATH="$LD_LIBRARY_PATH"
# Headers of libraries found without pkg-config (libzmq: meson.build).
export CPATH="$_root/.devdeps/usr/include${CPATH:+:$CPATH}"
export PATH="/usr/local/cuda/bin:$PATH"
unset _root
