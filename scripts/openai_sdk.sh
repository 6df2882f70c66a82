#!/usr/bin/env bash
# Installs the official OpenAI and Anthropic Node SDKs, the versions pinned in
# tests/openai_sdk/package.json, for tests/openai_sdk_test.cpp, which drives the server with them.
# They go outside the source tree, into
# ${MLASERVE_OPENAI_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlaserve/openai-node}: shared by every
# checkout and build folder of this user, kept across clean builds, and never seen by git. npm is
# only called when one of those versions is missing (scripts/test.sh runs this before ctest).
#   scripts/openai_sdk.sh         install if missing
#   scripts/openai_sdk.sh --dir   print the folder (the tests' NODE_PATH is its node_modules)
set -euo pipefail
cd "$(dirname "$0")/.."
DIR=${MLASERVE_OPENAI_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/mlaserve/openai-node}
if [ "${1:-}" = "--dir" ]; then
  echo "$DIR"
  exit 0
fi

for tool in node npm; do
  command -v "$tool" >/dev/null || { echo "openai_sdk: $tool not found (run scripts/setup.sh)" >&2; exit 1; }
done
# "name@version" of every pinned package, one a line.
wanted=$(node -e "
  const deps = require('./tests/openai_sdk/package.json').dependencies;
  for (const [name, version] of Object.entries(deps)) console.log(name + '@' + version);")
# The same list for what $DIR holds (a missing package shows as name@).
installed() {
  local spec name
  for spec in $wanted; do
    name=${spec%@*}
    echo "$name@$(node -p "require('$DIR/node_modules/$name/package.json').version" 2>/dev/null || true)"
  done
}
summary=$(paste -sd " " <<<"$wanted")
if [ "$(installed)" = "$wanted" ]; then
  echo "openai_sdk: $summary present in $DIR"
  exit 0
fi

mkdir -p "$DIR"
# Two checkouts may run this at once: one installs, the other waits and finds it done.
exec 9>"$DIR/.lock"
flock 9
if [ "$(installed)" != "$wanted" ]; then
  echo "openai_sdk: installing $summary into $DIR"
  cp tests/openai_sdk/package.json "$DIR/package.json"
  npm install --prefix "$DIR" --no-audit --no-fund --loglevel=error >/dev/null
  [ "$(installed)" = "$wanted" ] || {
    echo "openai_sdk: npm did not install $summary; $DIR has: $(installed | paste -sd " ")" >&2
    exit 1
  }
fi
