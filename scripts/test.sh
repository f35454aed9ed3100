#!/usr/bin/env bash
# Installs what is missing, builds, runs every test, and ends with one line
# "N passed, N failed, N skipped". GPU tests skip (exit 77) without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
CBF_SETUP_PYTHON=1 bash scripts/setup.sh || { echo "0 passed, 1 failed"; exit 1; }
meson test -C build --print-errorlogs --num-processes 2 "$@"
rc=$?
python3 scripts/test-summary.py build/meson-logs/testlog.json || rc=1
exit $rc
