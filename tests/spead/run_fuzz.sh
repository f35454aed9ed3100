#!/bin/sh
# run_fuzz.sh FUZZER SEED_CORPUS WORK_DIR SECONDS: bounded libFuzzer run; new
# inputs go to WORK_DIR so the seed corpus in the source tree stays as it is.
if [ ! -x "$1" ]; then
    echo "skipped: libFuzzer not available (needs clang with -fsanitize=fuzzer)"
    exit 77
fi
mkdir -p "$3" || exit 1
exec "$1" -max_total_time="$4" -rss_limit_mb=2048 -max_len=9000 -print_final_stats=1 "$3" "$2"
