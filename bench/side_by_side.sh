#!/usr/bin/env bash
# Issue 7's table in one run: mlaserve bench-one-batch and llama.cpp's llama-bench on the same
# bench-model weights, alternating round by round so that both see the same machine load.
#
#   bench/side_by_side.sh MLASERVE_BIN MODEL_DIR GGUF LLAMA_BENCH [ROUNDS] [OUT_DIR] [Q8_0_GGUF]
#
# MODEL_DIR: `mlaserve make-model --config bench/bench-500m.config.json --out DIR`;
# GGUF: the same weights converted by bench/hf_to_gguf.py. Each round runs, in order: ours bf16
# batch 1 (input 512, output 64: prefill of 512 tokens, then decode at depth 512), llama.cpp
# pp512 and tg64 at depth 512 (-d 512, so that decode attends over the same 512 tokens), ours
# bf16 batch 32 (input 128, output 16), ours float32 batch 1 and batch 32. Writes
# OUT_DIR/ours.jsonl, OUT_DIR/llama.jsonl and OUT_DIR/load.txt (load average before each run),
# then prints the median of each figure over the rounds. With Q8_0_GGUF (hf_to_gguf.py
# --outtype q8_0), each round also runs ours with --quantization int8 at batch 1 and llama.cpp's
# pp512 and tg64 at depth 512 on the Q8_0 model.
set -euo pipefail
BIN=$1 MODEL=$2 GGUF=$3 LLAMA_BENCH=$4 ROUNDS=${5:-3} OUT=${6:-/tmp/side-by-side} Q8=${7:-}
mkdir -p "$OUT"
: > "$OUT/ours.jsonl"
: > "$OUT/llama.jsonl"
: > "$OUT/load.txt"

ours() {  # run-name dtype batch input output [more bench-one-batch flags]
  echo "$1 $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  OMP_NUM_THREADS=2 "$BIN" bench-one-batch --model "$MODEL" --run-name "$1" --dtype "$2" \
    --batch-size "$3" --input-len "$4" --output-len "$5" --result-filename "$OUT/ours.jsonl" \
    "${@:6}" > /dev/null 2>&1
}

llama() {  # name, gguf, then llama-bench flags
  local name=$1 gguf=$2
  shift 2
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  "$LLAMA_BENCH" -m "$gguf" -t 2 -r 3 -o jsonl "$@" >> "$OUT/llama.jsonl" 2> /dev/null
}

for round in $(seq "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  ours bf16-bs1 bfloat16 1 512 64
  llama pp512 "$GGUF" -p 512 -n 0
  llama tg64-d512 "$GGUF" -p 0 -n 64 -d 512
  ours bf16-bs32 bfloat16 32 128 16
  ours f32-bs1 float32 1 512 64
  ours f32-bs32 float32 32 128 16
  if [ -n "$Q8" ]; then
    ours int8-bs1 bfloat16 1 512 64 --quantization int8
    llama q8-pp512 "$Q8" -p 512 -n 0
    llama q8-tg64-d512 "$Q8" -p 0 -n 64 -d 512
  fi
done

python3 - "$OUT" "$GGUF" "$Q8" << 'EOF'
import json, statistics, sys
out, gguf, q8 = sys.argv[1], sys.argv[2], sys.argv[3]
def median(values):
    return statistics.median(values) if values else float("nan")
def rounds(values):
    return ", ".join("%.1f" % v for v in values)
ours = [json.loads(l) for l in open(f"{out}/ours.jsonl")]
for name in ["bf16-bs1", "bf16-bs32", "f32-bs1", "f32-bs32", "int8-bs1"]:
    runs = [r for r in ours if r["run_name"] == name]
    if not runs:
        continue
    print(f"mlaserve {name}: prefill {median([r['prefill_throughput'] for r in runs]):.1f} tok/s, "
          f"decode {median([r['median_decode_throughput'] for r in runs]):.1f} tok/s "
          f"(rounds: {rounds([r['median_decode_throughput'] for r in runs])})")
llama = [json.loads(l) for l in open(f"{out}/llama.jsonl")]
for label, model in [("", gguf), ("Q8_0 ", q8)]:
    for kind, key in [("pp512", "n_prompt"), ("tg64 at depth 512", "n_gen")]:
        runs = [r for r in llama if r[key] > 0 and r["model_filename"] == model]
        if runs:
            print(f"llama.cpp {label}{kind}: {median([r['avg_ts'] for r in runs]):.1f} tok/s "
                  f"(rounds: {rounds([r['avg_ts'] for r in runs])})")
EOF
