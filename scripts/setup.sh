#!/usr/bin/env bash
# Installs what cbf needs on a Debian machine (only what is missing), then
# configures and builds it in ./build. Used by quickstart.sh and test.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

# One line per phase, so a minute of apt or ninja is not silence; a phase
# that cannot work says which and why, and exits 3 (test.sh tells a set-up
# failure from failing tests by it).
phase() { echo "setup: $*"; }
fail_setup() {
    echo "setup: FAILED: $*" >&2
    exit 3
}

# What the build needs, then the programs the docs' commands run (git; curl
# and nc for the control plane, docs/control.md; ip and ss for network
# namespaces, docs/network.md; sysctl; systemd-analyze and systemctl,
# docs/scaling.md). tests/tools/programs.py lists every program the docs and
# tests run with its package, and the docs_commands and tests_programs tests
# hold these lists to it.
debs="build-essential meson ninja-build pkg-config libyaml-dev libhdf5-dev hdf5-tools
      libfftw3-dev libzmq3-dev libcmocka-dev libpcap-dev libibverbs-dev libjansson-dev
      libmicrohttpd-dev
      python3 python3-venv python3-pip clang python3-numpy python3-h5py python3-yaml
      python3-matplotlib
      git curl netcat-openbsd iproute2 procps systemd"
# The tests also run cbf-run under valgrind (tests/runtime/leaks.py) and
# the Slurm example through shellcheck (tests/tools/check_slurm.sh).
test_debs="valgrind shellcheck"
[ "${CBF_SETUP_PYTHON:-0}" = 1 ] && debs="$debs $test_debs"
phase "checking $(echo $debs | wc -w) Debian packages"
missing=""
for p in $debs; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
if [ -n "$missing" ]; then
    sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        command -v sudo >/dev/null ||
            fail_setup "missing Debian packages:$missing; run this as root, or have root run: apt-get install$missing"
        sudo="sudo"
    fi
    phase "installing$missing with apt-get (a minute or two)"
    $sudo apt-get update -qq ||
        fail_setup "apt-get update failed: are the Debian package mirrors reachable?"
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null ||
        fail_setup "apt-get could not install$missing"
fi

# nvcc is optional: when it is installed (CUDA toolkit), the GPU kernels are built too.
for d in /usr/local/cuda/bin /usr/lib/cuda/bin; do
    [ -x "$d/nvcc" ] && case ":$PATH:" in *":$d:"*) ;; *) PATH="$d:$PATH";; esac
done
export PATH

# With nvcc, the F-engine's fused FFT + post kernel (fft_post `fft: auto`)
# needs NVIDIA's cuFFTDx headers: PyPI's nvidia-mathdx wheel, header-only,
# unpacked into .mathdx/ where meson looks (scripts/fetch-mathdx.sh). The
# build works without them (the four-pass path), so a failed fetch warns
# rather than stops the set-up.
mathdx_new=0
if command -v nvcc >/dev/null && [ ! -f .mathdx/nvidia/mathdx/include/cufftdx.hpp ]; then
    phase "fetching NVIDIA's cuFFTDx headers (PyPI wheel nvidia-mathdx, for the fused F-engine kernel)"
    if [ -x build-venv/bin/pip ]; then pip=build-venv/bin/pip; else pip=pip3; fi
    if bash scripts/fetch-mathdx.sh "$pip" >mathdx-fetch.log 2>&1; then
        mathdx_new=1
    else
        echo "setup: WARNING: cuFFTDx could not be fetched (log: mathdx-fetch.log): the build leaves out the fused F-engine kernel and fft_post runs its four-pass path" >&2
    fi
fi

# Test peers (spead2, numpy, h5py, PyYAML, prometheus_client, aiokatcp, matplotlib) live in a virtual environment of their own,
# never in the system Python. Only the tests use them.
if [ "${CBF_SETUP_PYTHON:-0}" = 1 ]; then
    if [ ! -x build-venv/bin/python ]; then
        phase "making the test peers' virtual environment build-venv"
        python3 -m venv build-venv || fail_setup "python3 -m venv build-venv failed"
    fi
    if ! build-venv/bin/python -c 'import numpy, h5py, spead2, yaml, prometheus_client, aiokatcp, matplotlib' 2>/dev/null; then
        phase "installing the test peers (numpy, h5py, spead2, pyyaml, prometheus_client, aiokatcp, matplotlib) into build-venv with pip"
        build-venv/bin/python -m pip install -q numpy h5py spead2 pyyaml prometheus_client aiokatcp matplotlib ||
            fail_setup "pip could not install the test peers: is PyPI reachable?"
    fi
    pyopt="-Dtest_python=$PWD/build-venv/bin/python"
else
    pyopt=""
fi

# A build configured before the headers came has cached their absence.
[ "$mathdx_new" = 1 ] && [ -f build/build.ninja ] && rm -rf build
if [ ! -f build/build.ninja ]; then
    phase "configuring ./build (meson; nvcc $(command -v nvcc >/dev/null && echo found: CUDA kernels too || echo absent: CPU path only))"
    meson setup build $pyopt >build-setup.log 2>&1 || { cat build-setup.log; fail_setup "meson setup (log: build-setup.log)"; }
elif [ -n "$pyopt" ]; then
    meson configure build $pyopt >/dev/null
fi
phase "building (ninja; log: build.log)"
ninja -C build >build.log 2>&1 || { tail -50 build.log; fail_setup "the build (log: build.log)"; }
# ninja numbers its steps "[k/N]"; N of the last one is this build's count.
steps=$(grep -o '^\[[0-9]*/[0-9]*\]' build.log | tail -1 | sed 's|.*/||; s|\]||' || true)
echo "setup: built cbf in ./build (${steps:-0} build steps, log: build.log)"
