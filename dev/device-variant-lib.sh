# Sourced by the device-*-variants.sh tuning scripts, on the GPU machine:
# builds the tree and runs the beamform suite once (dev/device-all.sh),
# leaves the shell in build-device-all (or VARIANT_DIR, below), and defines
#   variant_compile SOURCE EDITS OBJ   one CUDA source file (its name, e.g.
#       beamform.cu) of a copy of kernels/ with EDITS made to it
#       (dev/variant-src.sh: NAME for dev/variants/NAME.patch, NAME=VALUE
#       for a #define such as a tuning value; space-separated; none: the
#       tree's own) compiled with the build's own nvcc command line into
#       OBJ, the edits' and ptxas's report in OBJ.log (several may run at
#       once; the copy is OBJ.src)
#   variant_regs LOG KERNEL   registers and spill stores from such a report
#       for the entry function whose mangled name matches KERNEL
#   variant_link SOURCE OBJ   OBJ in place of SOURCE's object, every static
#       library re-archived (the correlator's library takes
#       correlator_sm90.cu.o too, by link_whole, and comes first on the
#       link line: re-archiving one library alone left the old kernel
#       linked), cbf-bench relinked
#   variant_build SOURCE EDITS KERNEL   the three in turn, in place
# The kernels hold no compile-time switches: a variant is a patch or a
# changed constant of a copy (dev/variants/README.md).
# Each object a variant replaced is removed at exit, so that the next build
# there makes the tree's own again.
# VARIANT_DIR set: the caller has built cbf-bench in that build directory
# itself (a narrower build), and the suite is not run.
cd "$(dirname "${BASH_SOURCE[0]}")/.." && source dev/device-env.sh
if [ -z "${VARIANT_DIR:-}" ]; then
    ALL_TESTS="--suite beamform" ALL_BENCH="" bash dev/device-all.sh 2>&1 | grep -E "== tests|== build"
    VARIANT_DIR=build-device-all
fi
VARIANT_ROOT=$PWD
cd "$VARIANT_DIR"
VARIANT_CMDS=$(ninja -t commands tools/bench/cbf-bench)

# SOURCE's object file in the build
variant_obj() {
    echo "$VARIANT_CMDS" | grep "/$1.o -c" | grep -oE -- "-o [^ ]*/$1.o" | cut -c4-
}

# The copy's kernels/ stands in for the tree's on the command line (the
# source and every -I of it): one file compiled from the copy takes the
# copy's headers too.
variant_compile() {
    local cc obj src up tree
    cc=$(echo "$VARIANT_CMDS" | grep "/$1.o -c")
    obj=$(variant_obj "$1")
    src=$(echo "$cc" | grep -oE -- "-c [^ ]*kernels/[^ ]*/$1\$" | cut -c4-)
    up=${src%%kernels/*}
    case $3 in /*) tree=$3.src ;; *) tree=$PWD/$3.src ;; esac
    if [ -z "$src" ] || [ -z "$up" ]; then
        echo "no source path of $1 under kernels/ in: $cc" >"$3.log"
        return 1
    fi
    # shellcheck disable=SC2086 # EDITS: one word each
    bash "$VARIANT_ROOT/dev/variant-src.sh" "$VARIANT_ROOT" "$tree" $2 >"$3.log" 2>&1 || return 1
    cc=${cc//"${up}kernels/"/$tree/kernels/}
    eval "${cc/-o $obj/-Xptxas -v -o $3}" >>"$3.log" 2>&1
}

variant_regs() {
    grep -A3 "entry function '.*$2" "$1" |
        grep -oE "[0-9]+ bytes spill stores|Used [0-9]+ registers" | tr '\n' ' '
}

# Objects a variant replaced in the build: removed when the script exits, so
# the next ninja there (a warm machine keeps the build) rebuilds the tree's
# own instead of testing and linking the last variant.
VARIANT_REPLACED=""
trap 'rm -rf $VARIANT_REPLACED' EXIT

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
    VARIANT_REPLACED="$VARIANT_REPLACED $PWD/$obj $PWD/$obj.src"
    variant_compile "$1" "$2" "$obj" || { tail -5 "$obj.log"; return 1; }
    variant_regs "$obj.log" "$3"
    variant_link "$1" "$obj"
}
