#!/usr/bin/env bash
# Builds the libFuzzer harnesses with clang, ASan and UBSan into build-fuzz/ and runs each one
# (fuzz/README.md says what each covers).
#   scripts/fuzz.sh [SECONDS] [TARGET...]   fuzz each target for SECONDS (default 60) from its
#                                           seed corpus; new inputs go to build-fuzz/corpus/,
#                                           crashes to build-fuzz/artifacts/
#   scripts/fuzz.sh 0 [TARGET...]           replay only: run each seed once (what CI does)
#   scripts/fuzz.sh --available             exit 0 when clang can build libFuzzer targets here
# JOBS sets the build's parallelism (default: all cores).
set -euo pipefail
cd "$(dirname "$0")/.."

TARGETS=(tokenizer_fuzz tiktoken_fuzz chat_template_fuzz chat_output_fuzz request_fuzz anthropic_request_fuzz responses_request_fuzz config_fuzz v4_config_fuzz safetensors_fuzz)

clang_can_fuzz() {
  command -v clang++ >/dev/null || return 1
  local probe
  probe=$(mktemp -d)
  echo 'extern "C" int LLVMFuzzerTestOneInput(const char*, unsigned long) { return 0; }' \
    >"$probe/probe.cpp"
  # -fopenmp: the fuzz build configures every folder, and the kernels' find_package(OpenMP)
  # needs clang's OpenMP runtime.
  local status=0
  clang++ -fsanitize=fuzzer,address,undefined -fopenmp "$probe/probe.cpp" -o "$probe/probe" \
    2>/dev/null || status=1
  rm -rf "$probe"
  return $status
}

if [ "${1:-}" = "--available" ]; then
  clang_can_fuzz
  exit
fi

SECONDS_EACH=${1:-60}
shift || true
[ $# -gt 0 ] && TARGETS=("$@")

clang_can_fuzz || bash scripts/setup.sh --fuzz
CXX=clang++ cmake -S . -B build-fuzz -DCMAKE_BUILD_TYPE=Release -DMLASERVE_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"${JOBS:-$(nproc)}" --target "${TARGETS[@]}"

# Every input must finish within -timeout seconds and -rss_limit_mb of memory: a hang or a
# runaway allocation on hostile input is a finding like a crash.
limits=(-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024)
for target in "${TARGETS[@]}"; do
  seeds="fuzz/corpus/$target"
  if [ "$SECONDS_EACH" = 0 ]; then
    echo "fuzz: replaying $(ls "$seeds" | wc -l) seeds of $target"
    "build-fuzz/fuzz/$target" "${limits[@]}" "$seeds"/* 2>build-fuzz/$target.replay.log ||
      { tail -n 40 "build-fuzz/$target.replay.log"; exit 1; }
    continue
  fi
  dict=(-dict=fuzz/json.dict)
  [ "$target" = chat_template_fuzz ] && dict=(-dict=fuzz/jinja.dict)
  [ "$target" = tokenizer_fuzz ] && dict=()
  [ "$target" = tiktoken_fuzz ] && dict=()
  mkdir -p "build-fuzz/corpus/$target" build-fuzz/artifacts
  echo "fuzz: $target for ${SECONDS_EACH}s"
  "build-fuzz/fuzz/$target" "${limits[@]}" "${dict[@]}" -max_total_time="$SECONDS_EACH" \
    -print_final_stats=1 -artifact_prefix="build-fuzz/artifacts/$target-" \
    "build-fuzz/corpus/$target" "$seeds" 2>&1 | tee "build-fuzz/$target.log" | grep -E \
    "^(#[0-9]+ *(DONE|NEW)|stat::number_of_executed_units|==[0-9]+==ERROR|SUMMARY)" | tail -n 5
done
