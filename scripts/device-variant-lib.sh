# Sourced by the device-*-variants.sh tuning scripts, on the GPU machine:
# builds the tree and runs the beamform suite once (scripts/device-all.sh),
# leaves the shell in build-device-all (or VARIANT_DIR, below), and defines
#   variant_build SOURCE DEFINES KERNEL
# which recompiles one CUDA source file (its name, e.g. beamform.cu) with
# extra -D flags, re-archives the static libraries, relinks cbf-bench and
# prints ptxas's registers and spill stores for the entry function whose
# mangled name matches KERNEL.
# VARIANT_DIR set: the caller has built cbf-bench in that build directory
# itself (a narrower build), and the suite is not run.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source scripts/device-env.sh
if [ -z "${VARIANT_DIR:-}" ]; then
    ALL_TESTS="--suite beamform" ALL_BENCH="" bash scripts/device-all.sh 2>&1 | grep -E "== tests|== build"
    VARIANT_DIR=build-device-all
fi
cd "$VARIANT_DIR"
VARIANT_CMDS=$(ninja -t commands tools/bench/cbf-bench)

variant_build() {
    local cc ar
    cc=$(echo "$VARIANT_CMDS" | grep "/$1.o -c")
    eval "${cc/ -o / -Xptxas -v $2 -o } 2>&1" | grep -A3 "entry function '.*$3" |
        grep -oE "[0-9]+ bytes spill stores|Used [0-9]+ registers" | tr '\n' ' '
    while read -r ar; do
        eval "$ar" || return 1
    done < <(echo "$VARIANT_CMDS" | grep "\.a && ")
    eval "$(echo "$VARIANT_CMDS" | tail -1)"
}
