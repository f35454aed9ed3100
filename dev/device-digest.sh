#!/usr/bin/env bash
# On the lent GPU machine: builds a base tree (a `git archive` tarball,
# carried in .base/base.tar) beside this one and compares the HDF5 outputs
# of every finite shipped pipeline, dataset by dataset, on the GPU
# (dev/output-digest.py). h5py travels as a wheel in .whl/.
#
#   git archive <base-commit> -o .base/base.tar
#   device run, carry [.devdeps, .whl, .base]:  bash dev/device-digest.sh
#
# Run after dev/device-all.sh (it reuses that build when present).
set -uo pipefail
cd "$(dirname "$0")/.."
source dev/device-env.sh
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/site .whl/*.whl && export PYTHONPATH=/tmp/site || exit 1
NEW=${NEW_BUILD:-build-device-all}
BASE=/tmp/cbf-base
rm -rf "$BASE" && mkdir -p "$BASE" && tar -xf .base/base.tar -C "$BASE" || exit 1
# The base tree finds .devdeps through its own dev/device-env.sh.
ln -s "$PWD/.devdeps" "$BASE/.devdeps"
{
    [ -f "$NEW/build.ninja" ] || meson setup "$NEW" -Dcuda=enabled
    ninja -C "$NEW"
    (cd "$BASE" && meson setup build -Dcuda=enabled -Dtests=false && ninja -C build)
} >"$OUT/digest-build.log" 2>&1 || { tail -30 "$OUT/digest-build.log"; echo "== build FAILED"; exit 1; }
python3 dev/output-digest.py --build "$BASE/build" >"$OUT/digest-base.txt" || echo "== base run failed"
python3 dev/output-digest.py --build "$NEW" >"$OUT/digest-new.txt" || echo "== new run failed"
echo "== datasets: $(wc -l <"$OUT/digest-new.txt") new, $(wc -l <"$OUT/digest-base.txt") base"
if diff "$OUT/digest-base.txt" "$OUT/digest-new.txt" >"$OUT/digest-diff.txt"; then
    echo "== outputs bit-identical to the base on the GPU"
else
    echo "== outputs DIFFER:"; head -40 "$OUT/digest-diff.txt"; exit 1
fi
