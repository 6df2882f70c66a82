#!/usr/bin/env bash
# Builds the peer the bench scripts compare against, llama.cpp's llama-bench and llama-server,
# outside this repository. Debian 12 packages neither llama.cpp nor its gguf-py, but the npm
# package node-llama-cpp carries llama.cpp's source as a git bundle (llama/gitRelease.bundle,
# gguf-py included), so this fetches that package with npm, clones the bundle into DIR and
# builds for this CPU (-march=native; ~12 min on 2 cores). Nothing of it enters the repository.
#
#   bench/get_llama_cpp.sh [DIR=/tmp/llama.cpp] [NODE_LLAMA_CPP_VERSION=3.22.1]
#
# Then: PYTHONPATH=DIR/gguf-py python3 bench/hf_to_gguf.py MODEL_DIR OUT.gguf [--outtype q8_0]
# (needs python3-numpy), bench/side_by_side.sh ... DIR/build/bin/llama-bench, and
# bench/serving_vs_llama.sh ... DIR/build/bin/llama-server.
set -euo pipefail
dir=${1:-/tmp/llama.cpp}
version=${2:-3.22.1}
for tool in npm git cmake; do
  command -v "$tool" >/dev/null || { echo "get_llama_cpp.sh needs $tool" >&2; exit 1; }
done
if [ ! -d "$dir/.git" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  (cd "$work" && npm pack --silent "node-llama-cpp@$version" >/dev/null && tar xzf ./*.tgz)
  bundle=$work/package/llama/gitRelease.bundle
  [ -f "$bundle" ] || { echo "node-llama-cpp $version carries no llama/gitRelease.bundle" >&2; exit 1; }
  git -c advice.detachedHead=false clone --quiet "$bundle" "$dir"
fi
echo "llama.cpp source: $dir at $(git -C "$dir" rev-parse --short HEAD)"
cmake -S "$dir" -B "$dir/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=ON -DLLAMA_CURL=OFF \
  -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF >/dev/null
cmake --build "$dir/build" -j"$(nproc)" --target llama-bench llama-server >/dev/null
echo "llama-bench:  $dir/build/bin/llama-bench"
echo "llama-server: $dir/build/bin/llama-server"
echo "gguf-py:      PYTHONPATH=$dir/gguf-py"
