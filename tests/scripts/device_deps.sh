#!/usr/bin/env bash
# The GPU machine's library bundle (dev/fetch-device-deps.sh, .devdeps)
# covers every shared library this build links, transitively: each comes from
# the build, CUDA, a bare Debian/Ubuntu image, or a package the bundle carries.
# Read from this machine's apt lists and ldd, so it runs where the build was
# made on Debian 12 (as CI is); elsewhere it skips. The check must be able to
# fail: with a carried package left out (libdbus-1-3, which libpcap needs and
# the bundle once missed), it must fail naming that library.
# Args: SOURCE_ROOT BUILD_ROOT
set -u
src=$1 build=$2
tool="$src/dev/devdeps.py"
# The bundle is made from Debian 12's packages (their names are in
# dev/devdeps.py): elsewhere (the GPU machine's Ubuntu) this check skips.
os_id=$(. /etc/os-release 2>/dev/null && echo "${ID:-}-${VERSION_ID:-}")
if [ "$os_id" != debian-12 ] || ! command -v apt-cache >/dev/null || ! command -v dpkg >/dev/null ||
   ! apt-cache show libc6 libpcap0.8 libyaml-0-2 >/dev/null 2>&1; then
    echo "SKIP: not Debian 12 with its apt lists ($os_id); the bundle is made from Debian 12's packages"
    exit 77
fi
fail=0
out=$("$tool" check "$build" 2>&1) || { echo "$out"; echo "FAIL: the bundle's packages do not cover the build"; fail=1; }
echo "$out" | tail -1

drop_check() {   # package, a library of it the build links
    local out
    if out=$("$tool" check "$build" --drop "$1" 2>&1); then
        echo "$out"; echo "FAIL: without $1 the check still passed"; fail=1
    elif ! grep -q "^not in the bundle.*$2" <<<"$out"; then
        echo "$out"; echo "FAIL: without $1 the check did not name $2"; fail=1
    else
        echo "without $1: fails naming $2, as it must"
    fi
}
drop_check libyaml-0-2 libyaml-0.so.2
if ldd "$build"/plugins/receiver/*.so 2>/dev/null | grep -q libpcap; then
    drop_check libdbus-1-3 libdbus-1.so.3
fi

# A bundle already fetched here must cover the build too (the file in it, and
# pkg-config from it alone); refetch with dev/fetch-device-deps.sh.
if [ -d "$src/.devdeps" ]; then
    out=$("$tool" check "$build" --bundle "$src/.devdeps" 2>&1) ||
        { echo "$out"; echo "FAIL: $src/.devdeps is stale: run dev/fetch-device-deps.sh"; fail=1; }
    echo "bundle $src/.devdeps: $(echo "$out" | tail -1)"
fi
exit $fail
