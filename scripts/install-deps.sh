#!/usr/bin/env bash
# Installs the Debian packages chorus needs to build and test, and only those
# that are missing. Usage: scripts/install-deps.sh [extra-package...]
set -euo pipefail
# The fuzz targets (make fuzz, part of make test) need clang, libFuzzer's and
# the sanitizers' runtimes (libclang_rt.fuzzer-x86_64.a is in libclang-rt-14-dev,
# only recommended by Debian 12's clang, so named here) and llvm-symbolizer
# (package llvm) for readable crash reports.
# The Python package (python/) needs Debian's interpreter with its headers,
# pybind11, numpy and pytest; the torch.distributed backend (python/torch/)
# Debian's torch 1.13 and its C++ headers (libtorch-dev). All of them load in
# /usr/bin/python3 only, which the build and the tests use.
# pip install . (pyproject.toml, setup.py) builds with setuptools and wheel
# in a virtual environment (python3-venv, python3-pip); ccache lets it, and
# its test, reuse the objects of the CMake build.
# make format and make format-check (run by .ci/run) need clang-format.
# CHORUS_METRICS=:PORT serves /metrics through cpp-httplib (libcpp-httplib-dev);
# the metrics tests parse the output with python3-prometheus-client.
# scripts/testbed (the testbed tests) needs ip and tc (iproute2), nsenter,
# unshare and mount (util-linux, mount) and Debian's python3.
pkgs=(cmake ninja-build g++ make pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      libcli11-dev nlohmann-json3-dev libssl-dev gnuplot-nox openmpi-bin clang libclang-rt-14-dev llvm
      python3-dev pybind11-dev python3-numpy python3-pytest python3-torch libtorch-dev
      python3-setuptools python3-wheel python3-venv python3-pip ccache clang-format
      iproute2 util-linux mount python3 libcpp-httplib-dev python3-prometheus-client "$@")
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "install-deps: installing ${missing[*]}"
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
