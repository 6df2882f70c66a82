#!/usr/bin/env bash
# DeepSeek-V3.2 (sparse attention) against llama.cpp's deepseek32 on the same weights, in one run:
# mlaserve bench-one-batch and llama-bench alternating round by round, so that both see the same
# machine load.
#
#   bench/dsa_side_by_side.sh MLASERVE_BIN MODEL_DIR GGUF LLAMA_BENCH [ROUNDS] [CONTEXT]
#
# MODEL_DIR: `mlaserve make-model --config bench/bench-500m-v32.config.json --out DIR`; GGUF: the
# same weights converted by bench/hf_to_gguf.py (deepseek_v32 -> deepseek32). Each round: ours at
# batch 1 (a prefill of CONTEXT tokens, default 8192, then 16 decode steps at that depth), then
# llama.cpp's pp CONTEXT and tg16 at depth CONTEXT (-d). Prints each run's figures in tok/s.
set -euo pipefail
BIN=$1 MODEL=$2 GGUF=$3 LLAMA_BENCH=$4 ROUNDS=${5:-2} CONTEXT=${6:-8192}
for round in $(seq "$ROUNDS"); do
  echo "round $round of $ROUNDS"
  OMP_NUM_THREADS=2 "$BIN" bench-one-batch --model "$MODEL" --batch-size 1 \
    --input-len "$CONTEXT" --output-len 16 2>&1 | grep -E "^Prefill|median" | sed 's/^/  mlaserve /'
  "$LLAMA_BENCH" -m "$GGUF" -t 2 -r 1 -p "$CONTEXT" -n 0 2>/dev/null | grep -E "pp$CONTEXT" |
    sed 's/^/  llama.cpp /'
  "$LLAMA_BENCH" -m "$GGUF" -t 2 -r 1 -p 0 -n 16 -d "$CONTEXT" 2>/dev/null | grep -E "tg16" |
    sed 's/^/  llama.cpp /'
done
