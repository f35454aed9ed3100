#!/usr/bin/env bash
# Installs what cbf needs on a Debian machine (only what is missing), then
# configures and builds it in ./build. Used by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

debs="build-essential meson ninja-build pkg-config libyaml-dev libhdf5-dev hdf5-tools
      libfftw3-dev libzmq3-dev libcmocka-dev libpcap-dev libibverbs-dev libjansson-dev
      libmicrohttpd-dev
      python3 python3-venv python3-pip clang python3-numpy python3-h5py python3-yaml"
missing=""
for p in $debs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    echo "setup: installing$missing"
    sudo=""; [ "$(id -u)" -eq 0 ] || sudo="sudo"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
fi

# nvcc is optional: when it is installed (CUDA toolkit), the GPU kernels are built too.
for d in /usr/local/cuda/bin /usr/lib/cuda/bin; do
    [ -x "$d/nvcc" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH="$d:$PATH";; esac
done
export PATH

# Test peers (spead2, numpy, h5py, PyYAML, prometheus_client) live in a virtual environment of their own,
# never in the system Python. Only the tests use them.
if [ "${CBF_SETUP_PYTHON:-0}" = 1 ]; then
    if [ ! -x build-venv/bin/python ]; then
        python3 -m venv build-venv
    fi
    build-venv/bin/python -c 'import numpy, h5py, spead2, yaml, prometheus_client' 2>/dev/null ||
        build-venv/bin/python -m pip install -q numpy h5py spead2 pyyaml prometheus_client
    pyopt="-Dtest_python=$PWD/build-venv/bin/python"
else
    pyopt=""
fi

if [ ! -f build/build.ninja ]; then
    meson setup build $pyopt >build-setup.log 2>&1 || { cat build-setup.log; exit 1; }
elif [ -n "$pyopt" ]; then
    meson configure build $pyopt >/dev/null
fi
ninja -C build >build.log 2>&1 || { tail -50 build.log; exit 1; }
echo "setup: built cbf in ./build ($(grep -c . build.log) build steps logged in build.log)"
