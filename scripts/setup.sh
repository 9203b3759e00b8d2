#!/usr/bin/env bash
# Installs what stratoscope needs on a fresh Debian machine (as root, or with sudo). Safe to run
# twice.
#
#   bash scripts/setup.sh          # the test suite's needs (scripts/test.sh, CI)
#   bash scripts/setup.sh demo     # only what scripts/demo.sh runs
#
# The demo (a shipped trace analysed, a CartPole loop recorded) needs no system package and two
# Python packages (scripts/requirements-demo.txt); building the package needs Rust and pip, which
# fetches maturin itself. The test suite also needs PoCL (a real OpenCL device on the CPU), its
# headers and clinfo, Chromium (the report's rendering test), a Java runtime (the Spark check of
# the shipped SQL), Linux `perf` (the perf importer's real recordings) and the Python packages of
# scripts/requirements-test.txt. Installing those for the demo cost minutes a new user does not
# need to spend (pyspark alone is ~490 MB).
set -euo pipefail

purpose=${1:-tests}
case "$purpose" in
  tests | demo) ;;
  *) echo "setup: unknown purpose '$purpose' (tests or demo)" >&2; exit 2 ;;
esac

SUDO=""
if [[ $(id -u) -ne 0 ]]; then SUDO="sudo"; fi

if [[ $purpose == tests ]]; then
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
fi

requirements=requirements-test.txt
if [[ $purpose == demo ]]; then requirements=requirements-demo.txt; fi
python3 -m pip install --quiet --disable-pip-version-check -r "$(dirname "$0")/$requirements"
