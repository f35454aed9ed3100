#!/usr/bin/env bash
# Installs what is missing, builds, and runs the default pipeline.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec build/tools/cbf-run "${1:-pipelines/dsim-to-hdf5.yaml}"
