# Sourced by the dev/device-*.sh scripts on the lent GPU machine, after
# their `cd` to the tree's root.
#
# device_start B: the start they share: the carried libraries on the paths
# (device-env.sh), $OUT for the logs (./out when run by hand) made, and B,
# the build folder.
device_start() {
    source dev/device-env.sh
    OUT=${OUT:-$PWD/out}
    mkdir -p "$OUT"
    B=$1
}

# run_logged NAME SECONDS CMD...: runs CMD with a time limit,
# appends its output to $T under a "==== NAME" line, leaves it in
# $OUT/one.log for the caller's summary, sets rc=1 if it failed, and
# returns CMD's exit status.
run_logged() {
    local name="$1" limit="$2"
    shift 2
    echo "==== $name" >>"$T"
    timeout "$limit" "$@" >"$OUT/one.log" 2>&1
    local r=$?
    cat "$OUT/one.log" >>"$T"
    [ $r -eq 0 ] || rc=1
    return $r
}
