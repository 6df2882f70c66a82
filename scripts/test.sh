#!/usr/bin/env bash
# Sets everything up (apt packages), builds with warnings as errors, and runs the whole test suite with ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
MLASERVE_WERROR=ON bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 "$@"
