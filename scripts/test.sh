#!/usr/bin/env bash
# Installs what is missing, builds, runs every test, and ends with one line
# "N passed, N failed, N skipped". GPU tests skip (exit 77) without a GPU.
set -uo pipefail
cd "$(dirname "$0")/.."
if ! CBF_SETUP_PYTHON=1 bash scripts/setup.sh; then
    echo "set-up failed (above): no test ran"
    echo "0 passed, 0 failed, 0 skipped"
    exit 1
fi
meson test -C build --print-errorlogs --num-processes 2 "$@"
rc=$?
# A machine without nvcc builds only the CPU path: where ./build has the CUDA
# kernels, build the tree once more without them, so code that compiles only
# with CUDA (an unused parameter outside an #ifdef, say) fails here too.
extra=()
if grep -q -- "-DCBF_HAVE_CUDA=1" build/build.ninja 2>/dev/null; then
    if { [ -f build-nocuda/build.ninja ] ||
         meson setup build-nocuda -Dcuda=disabled >build-nocuda.log 2>&1; } &&
       ninja -C build-nocuda >>build-nocuda.log 2>&1; then
        extra=(--extra "build without CUDA=OK")
    else
        tail -30 build-nocuda.log
        extra=(--extra "build without CUDA=FAIL")
    fi
fi
python3 scripts/test-summary.py build/meson-logs/testlog.json "${extra[@]}" || rc=1
exit $rc
