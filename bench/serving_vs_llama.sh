#!/usr/bin/env bash
# Issue 12's serving table in one run: mlaserve and llama.cpp's llama-server on the same weights
# and the same workload, with mlaserve's `bench-serving` as the client for both. Each server is
# started on a loopback port, warmed up on 8 prompts of its own (llama-server keeps each slot's
# last prompt, so re-sent prompts would flatter it; every run below sends prompts no earlier run
# sent), measured at each concurrency, and stopped before the other starts.
#
#   bench/serving_vs_llama.sh MLASERVE_BIN MODEL_DIR TOKENIZER GGUF LLAMA_SERVER \
#       [PROMPTS=64] [INPUT_LEN=256] [OUTPUT_LEN=64] [CONCURRENCIES="1 32"] [MLASERVE_FLAGS]
#
# MODEL_DIR: `mlaserve make-model --config bench/bench-500m.config.json --out DIR`; TOKENIZER:
# bench/pad_tokenizer.py's; GGUF: the same weights through bench/hf_to_gguf.py (with the
# tokenizer files in the model directory). llama-server runs with -np 32 -t 2 and a context of
# 512 tokens per slot. Prompts are random token ids turned into text; both servers re-tokenize
# it, and bench-serving counts what comes back with TOKENIZER.
set -euo pipefail
bin=$1 model=$2 tokenizer=$3 gguf=$4 llama_server=$5
prompts=${6:-64} input_len=${7:-256} output_len=${8:-64} concurrencies=${9:-"1 32"}
flags=${10:-}
port=${PORT:-30124}
out=$(mktemp -d)
server=
trap '[ -n "$server" ] && kill -TERM $server 2>/dev/null; wait 2>/dev/null; rm -rf "$out"' EXIT

# bench_run NAME BACKEND PROMPTS CONCURRENCY SEED: one bench-serving run; the result table goes
# to $out/NAME.txt.
bench_run() {
  "$bin" bench-serving --base-url "http://127.0.0.1:$port" --backend "$2" --tokenizer "$tokenizer" \
    --dataset random --num-prompts "$3" --random-input-len "$input_len" \
    --random-output-len "$output_len" --random-range-ratio 1 --request-rate inf \
    --max-concurrency "$4" --seed "$5" --output-file /dev/null >"$out/$1.txt" 2>/dev/null
}

# wait_ready URL: until it answers 200 (the server is killed after 300 s).
wait_ready() {
  for _ in $(seq 600); do
    curl -sf "$1" >/dev/null 2>&1 && return 0
    kill -0 "$server" 2>/dev/null || { echo "server exited; log:" >&2; cat "$out/server.log" >&2; exit 1; }
    sleep 0.5
  done
  echo "server not ready after 300 s" >&2
  exit 1
}

# measure NAME BACKEND: warm-up, then every concurrency; stops the server.
measure() {
  echo "== $1 (load: $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  bench_run "$1-warmup" "$2" 8 8 1
  for c in $concurrencies; do bench_run "$1-c$c" "$2" "$prompts" "$c" $((100 + c)); done
  kill -TERM "$server"
  wait "$server" 2>/dev/null || true
  server=
}

# shellcheck disable=SC2086  # the flags are a word list
"$bin" serve --model "$model" --tokenizer "$tokenizer" --port "$port" $flags >"$out/server.log" 2>&1 &
server=$!
wait_ready "http://127.0.0.1:$port/health"
measure mlaserve mlaserve

"$llama_server" -m "$gguf" -np 32 -t 2 -c $((32 * 512)) --host 127.0.0.1 --port "$port" \
  >"$out/server.log" 2>&1 &
server=$!
wait_ready "http://127.0.0.1:$port/health"
measure llama openai

# field FILE LABEL: the number on bench-serving's line that starts with LABEL.
field() { grep -m1 "^$2" "$1" | awk '{print $NF}'; }
printf '%-12s %-10s %12s %14s %16s %16s\n' server conc "duration s" "output tok/s" \
  "median TTFT ms" "median TPOT ms"
for c in $concurrencies; do
  for s in mlaserve llama; do
    f="$out/$s-c$c.txt"
    printf '%-12s %-10s %12s %14s %16s %16s\n' "$s" "$c" "$(field "$f" "Benchmark duration")" \
      "$(field "$f" "Output token throughput")" "$(field "$f" "Median TTFT")" \
      "$(field "$f" "Median TPOT")"
  done
done
