#!/usr/bin/env bash
# Installs everything stratoscope needs on a fresh Debian machine (as root, or with sudo):
# system packages (PoCL: a real OpenCL device on the CPU; headers; clinfo) and the Python
# packages the tests use. Safe to run twice.
set -euo pipefail

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

# openjdk-17-jre-headless: the Java runtime of pyspark (the Spark test of the shipped SQL).
# linux-perf: the `perf` tool, which records the real perf.data inputs of the perf importer's tests.
apt_packages=(pocl-opencl-icd ocl-icd-opencl-dev ocl-icd-libopencl1 opencl-headers clinfo chromium
  openjdk-17-jre-headless linux-perf)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

python3 -m pip install --quiet --disable-pip-version-check -r "$(dirname "$0")/requirements-test.txt"
