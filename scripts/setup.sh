#!/usr/bin/env bash
# Installs everything mlaserve needs from Debian 12 packages. Safe to run twice:
# it only calls apt when a package is missing. --fuzz adds what scripts/fuzz.sh needs: clang with
# its libFuzzer and sanitizer runtimes, and clang's OpenMP (the fuzz build configures every
# folder with clang). Node.js and npm are for the OpenAI SDK test (scripts/openai_sdk.sh installs
# the SDK itself from npm).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config git ca-certificates curl
  libopenmpi-dev openmpi-bin
  libdnnl-dev
  nlohmann-json3-dev libcpp-httplib-dev libcli11-dev
  libfmt-dev libspdlog-dev libpcre2-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  clang-format
  jq        # scripts/soak.sh reads the server's JSON and bench-serving's details with it
  iproute2  # ip netns / veth / tc for scripts/multihost.sh and its tests (util-linux's unshare too)
  nodejs    # Debian 12's Node 18 (or NodeSource's): tests/openai_sdk/ runs the official OpenAI SDK
  python3-numpy  # tests/reference/deepseek_reference.py: the tests' float64 DeepSeek reference forward
)
# NodeSource's nodejs bundles npm and conflicts with Debian's npm package: ask for it only when
# no npm is there.
command -v npm >/dev/null || PACKAGES+=(npm)
if [ "${1:-}" = "--fuzz" ]; then
  PACKAGES+=(clang libclang-rt-14-dev libomp-dev)
fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done

if [ ${#missing[@]} -gt 0 ]; then
  echo "setup: installing ${missing[*]}"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
else
  echo "setup: all ${#PACKAGES[@]} packages present"
fi
