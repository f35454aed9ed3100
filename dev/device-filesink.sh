#!/usr/bin/env bash
# On the lent GPU machine (through the device tool, carrying .devdeps):
# runs the wideband F-engine pipeline (dsim -> pfb -> fft_post -> filesink)
# once with gpu: required (filesink copies device buffers to host) and once
# with gpu: none, and leaves both HDF5 files and the logs in $OUT, for
# comparison on the development machine. Builds from the committed tree
# (git archive) so that half-written folders of others stay out.
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
SRC=/tmp/cbf-filesink-src
rm -rf "$SRC" && mkdir -p "$SRC"
if git rev-parse HEAD > /dev/null 2>&1; then
    git archive HEAD | tar -C "$SRC" -xf -
else
    cp -a meson.build meson_options.txt core kernels plugins tools tests net pipelines "$SRC/" 2>/dev/null
fi
cp -a .devdeps "$SRC/" 2>/dev/null
cd "$SRC"
B=build-device-filesink
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
{
    meson setup "$B" -Dtests=false &&
        ninja -C "$B" tools/cbf-run plugins/dsim/cbf_dsim.so plugins/pfb/cbf_pfb.so \
            plugins/fft_post/cbf_fft_post.so plugins/filesink/cbf_filesink.so
} > "$OUT/build.log" 2>&1 || { tail -40 "$OUT/build.log"; exit 1; }
echo "== build ok"
rc=0
for gpu in required none; do
    sed "s/^  gpu: .*/  gpu: $gpu/" pipelines/feng-wideband.yaml > "/tmp/feng-$gpu.yaml"
    "$B/tools/cbf-run" "/tmp/feng-$gpu.yaml" --set dsim.length=4194304 \
        --set "sink.path=$OUT/feng-$gpu.h5" --set sink.overwrite=true > "$OUT/run-$gpu.log" 2>&1
    r=$?
    echo "== gpu: $gpu: exit $r"
    tail -6 "$OUT/run-$gpu.log"
    [ $r -eq 0 ] || rc=1
done
exit $rc
