# Sourced by the device-*-variants.sh tuning scripts, on the GPU machine:
# builds the tree and runs the beamform suite once (dev/device-all.sh),
# leaves the shell in build-device-all (or VARIANT_DIR, below), and defines
#   variant_compile SOURCE DEFINES OBJ   one CUDA source file (its name, e.g.
#       beamform.cu) compiled with extra -D flags into OBJ, ptxas's report
#       in OBJ.log (several may run at once)
#   variant_regs LOG KERNEL   registers and spill stores from such a report
#       for the entry function whose mangled name matches KERNEL
#   variant_link SOURCE OBJ   OBJ in place of SOURCE's object, every static
#       library re-archived (the correlator's library takes
#       correlator_sm90.cu.o too, by link_whole, and comes first on the
#       link line: re-archiving one library alone left the old kernel
#       linked), cbf-bench relinked
#   variant_build SOURCE DEFINES KERNEL   the three in turn, in place
# Each object a variant replaced is removed at exit, so that the next build
# there makes the tree's own again.
# VARIANT_DIR set: the caller has built cbf-bench in that build directory
# itself (a narrower build), and the suite is not run.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source dev/device-env.sh
if [ -z "${VARIANT_DIR:-}" ]; then
    ALL_TESTS="--suite beamform" ALL_BENCH="" bash dev/device-all.sh 2>&1 | grep -E "== tests|== build"
    VARIANT_DIR=build-device-all
fi
cd "$VARIANT_DIR"
VARIANT_CMDS=$(ninja -t commands tools/bench/cbf-bench)

# SOURCE's object file in the build
variant_obj() {
    echo "$VARIANT_CMDS" | grep "/$1.o -c" | grep -oE -- "-o [^ ]*/$1.o" | cut -c4-
}

variant_compile() {
    local cc obj
    cc=$(echo "$VARIANT_CMDS" | grep "/$1.o -c")
    obj=$(variant_obj "$1")
    eval "${cc/-o $obj/-Xptxas -v $2 -o $3}" >"$3.log" 2>&1
}

variant_regs() {
    grep -A3 "entry function '.*$2" "$1" |
        grep -oE "[0-9]+ bytes spill stores|Used [0-9]+ registers" | tr '\n' ' '
}

# Objects a variant replaced in the build: removed when the script exits, so
# the next ninja there (a warm machine keeps the build) rebuilds the tree's
# own instead of testing and linking the last variant.
VARIANT_REPLACED=""
trap 'rm -f $VARIANT_REPLACED' EXIT

variant_link() {
    local ar obj
    obj=$(variant_obj "$1")
    VARIANT_REPLACED="$VARIANT_REPLACED $PWD/$obj"
    [ "$2" = "$obj" ] || cp "$2" "$obj" || return 1
    while read -r ar; do
        eval "$ar" || return 1
    done < <(echo "$VARIANT_CMDS" | grep "\.a && ")
    eval "$(echo "$VARIANT_CMDS" | tail -1)"
}

variant_build() {
    local obj
    obj=$(variant_obj "$1")
    variant_compile "$1" "$2" "$obj" || { tail -5 "$obj.log"; return 1; }
    variant_regs "$obj.log" "$3"
    variant_link "$1" "$obj"
}
