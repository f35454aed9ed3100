#!/usr/bin/env bash
# Installs cbf into a temporary DESTDIR, builds docs/example-plugin against
# that installation's cbf.pc (as a user outside the tree would), and runs
# the installed cbf-run on a pipeline feeding dsim into the example plugin.
# Built both ways the README gives (make in the folder, meson in build/), the
# folder named in CBF_PLUGIN_PATH still runs: the copy directly in it is used,
# with a note naming the other (it once failed, 'rms' defined twice).
# The tone of amplitude 0.5 must read -9.03 dBFS (20 log10(0.5 / sqrt 2))
# on every antenna and pol of every chunk: quantisation to 10 bits moves
# that by under 0.001 dB, so two decimals are exact.
set -euo pipefail
build=${CBF_BUILD_ROOT:?run through meson test}
src=${CBF_SOURCE_ROOT:?run through meson test}
if [ ! -x "$build/tools/cbf-run" ]; then
    echo "skipped: cbf-run is not built yet"
    exit 77
fi
for tool in pkg-config make cc; do
    command -v "$tool" > /dev/null || { echo "skipped: $tool not found"; exit 77; }
done
work=$(mktemp -d /tmp/cbf-example-XXXXXX)
trap 'rm -rf "$work"' EXIT

meson install -C "$build" --no-rebuild --quiet --destdir "$work/root" > "$work/install.log" 2>&1 ||
    { cat "$work/install.log"; echo "FAIL: meson install"; exit 1; }
pc=$(find "$work/root" -name cbf.pc | head -n 1)
[ -n "$pc" ] || { echo "FAIL: no cbf.pc installed"; exit 1; }
export PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_SYSROOT_DIR="$work/root"
cbf_run=$(find "$work/root" -path '*/bin/cbf-run' | head -n 1)
libdir=$(dirname "$(find "$work/root" -name 'libcbf.so*' | head -n 1)")
plugindir="$work/root$(pkg-config --variable=plugindir cbf | sed "s|^$work/root||")"
[ -x "$cbf_run" ] && [ -f "$plugindir/cbf_dsim.so" ] ||
    { echo "FAIL: installed cbf-run or dsim missing (plugindir $plugindir)"; exit 1; }

cp -r "$src/docs/example-plugin" "$work/ex"
make -C "$work/ex" > "$work/make.log" 2>&1 || { cat "$work/make.log"; echo "FAIL: make"; exit 1; }
[ -f "$work/ex/cbf_rms.so" ] || { echo "FAIL: cbf_rms.so not built"; exit 1; }
both=0
if command -v ninja > /dev/null; then
    (cd "$work/ex" && meson setup build && ninja -C build) > "$work/meson.log" 2>&1 ||
        { cat "$work/meson.log"; echo "FAIL: meson build of the example"; exit 1; }
    [ -f "$work/ex/build/cbf_rms.so" ] || { echo "FAIL: build/cbf_rms.so not built"; exit 1; }
    both=1
fi

# Only the installed plugins and the example: not the build tree's.
(cd "$work/ex" && LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" CBF_PLUGIN_PATH="$work/ex:$plugindir" \
    "$cbf_run" rms.yaml) > "$work/run.log" 2>&1 ||
    { cat "$work/run.log"; echo "FAIL: cbf-run rms.yaml"; exit 1; }

if [ "$both" = 1 ] &&
   ! grep -q "plugin 'rms': using '$work/ex/cbf_rms.so', not '$work/ex/build/cbf_rms.so'" "$work/run.log"; then
    cat "$work/run.log"
    echo "FAIL: built both ways, no note that $work/ex/cbf_rms.so is used"
    exit 1
fi
lines=$(grep -c "rms chunk" "$work/run.log" || true)
good=$(grep "rms chunk" "$work/run.log" | grep -c "0x -9.03 dBFS 0y -9.03 dBFS 1x -9.03 dBFS 1y -9.03 dBFS$" || true)
if [ "$lines" != 4 ] || [ "$good" != 4 ]; then
    cat "$work/run.log"
    echo "FAIL: expected 4 chunks at -9.03 dBFS on 0x 0y 1x 1y, got $good of $lines"
    exit 1
fi
echo "ok: example plugin built against the installed cbf.pc reads -9.03 dBFS on 4 chunks" \
     "(built with make$([ "$both" = 1 ] && echo " and meson"))"
