#!/usr/bin/env bash
# Sets everything up (apt packages, and the OpenAI Node SDK for tests/openai_sdk_test.cpp), builds
# with warnings as errors, and runs the whole test suite with ctest.
# Then, where clang can build libFuzzer targets, the fuzz harnesses replay their seed corpora
# (fuzz/README.md: a second, clang build of only the harnesses and their libraries in build-fuzz/);
# a seed that crashes again fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/openai_sdk.sh
MLASERVE_WERROR=ON bash scripts/build.sh
(cd build && ctest --output-on-failure --timeout 600 "$@")
if bash scripts/fuzz.sh --available; then
  bash scripts/fuzz.sh 0
else
  echo "test: clang with libFuzzer is not installed (scripts/setup.sh --fuzz): fuzz replay skipped"
fi
