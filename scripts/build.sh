#!/usr/bin/env bash
# Configures and builds mlaserve into build/ (Release). MLASERVE_WERROR=ON makes warnings errors
# (scripts/test.sh and CI set it); unset, the build keeps whatever build/ was configured with
# (off on a fresh checkout), so a user's compiler version cannot fail the build on a warning.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}
args=(-S . -B build -DCMAKE_BUILD_TYPE=Release)
[ -n "${MLASERVE_WERROR:-}" ] && args+=(-DMLASERVE_WERROR="$MLASERVE_WERROR")
cmake "${args[@]}" >/dev/null
cmake --build build -j"$JOBS"
