# Sourced by dev/device-ddc.sh and device-narrow.sh on the lent GPU
# machine. run_logged NAME SECONDS CMD...: runs CMD with a time limit,
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
