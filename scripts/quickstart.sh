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
# setup.sh installs Debian's python3-h5py/numpy/yaml: they belong to Debian's
# /usr/bin/python3, which a python3 earlier on PATH (pyenv, conda) may hide.
for py in python3 /usr/bin/python3; do
    if "$py" -c 'import h5py, numpy, yaml' 2>/dev/null; then
        exec "$py" scripts/xeng-phases.py demo.h5 --pipeline pipelines/demo.yaml
    fi
done
echo "quickstart: no python3 with h5py, numpy and yaml to print the table (demo.h5 is written)" >&2
exit 1
