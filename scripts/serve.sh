#!/usr/bin/env bash
# Sets everything up (apt packages), builds, and starts the server. With no --model it serves
# the built-in demo model on 127.0.0.1:30000. Extra arguments go to `mlaserve serve`.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh
exec build/src/tools/mlaserve serve "$@"
