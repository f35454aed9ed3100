#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default pipeline: the whole
# array in one process (pipelines/demo.yaml), then prints each baseline's
# amplitude and phase of the common tone next to the phase the simulated
# delays predict. With an argument, runs that pipeline instead.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
if [ $# -gt 0 ]; then
    exec build/tools/cbf-run "$@"
fi
build/tools/cbf-run pipelines/demo.yaml
echo
exec python3 scripts/xeng-phases.py demo.h5 --pipeline pipelines/demo.yaml
