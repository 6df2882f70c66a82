#!/usr/bin/env bash
# Issue 3's two timing ratios, each pair alternating round by round in one run:
#   dp_linear: tp 2, batch 32 x 256 tokens, prefill only, --enable-dp-linear off / on
#   DP padding: tp 2 dp 2 DP attention, batch 1, input 128, output 32, default / legacy
#
#   bench/parallel_ab.sh MLASERVE_BIN MODEL_DIR [ROUNDS] [OUT_DIR]
#
# Writes OUT_DIR/runs.jsonl (bench-one-batch records, run_name = the variant) and
# OUT_DIR/load.txt, then prints each variant's median and the ratios.
set -euo pipefail
BIN=$1 MODEL=$2 ROUNDS=${3:-3} OUT=${4:-/tmp/parallel-ab}
mkdir -p "$OUT"
: > "$OUT/runs.jsonl"
: > "$OUT/load.txt"

run() {  # run-name, then bench-one-batch flags
  local name=$1
  shift
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  "$BIN" bench-one-batch --model "$MODEL" --dtype bfloat16 --run-name "$name" \
    --result-filename "$OUT/runs.jsonl" "$@" > /dev/null 2>&1
}

PREFILL=(--tp 2 --batch-size 32 --input-len 256 --output-len 1)
DECODE=(--tp 2 --dp 2 --enable-dp-attention --batch-size 1 --input-len 128 --output-len 32)
for round in $(seq "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  run dp-linear-off "${PREFILL[@]}"
  run dp-linear-on "${PREFILL[@]}" --enable-dp-linear
  run padding-default "${DECODE[@]}"
  run padding-legacy "${DECODE[@]}" --dp-padding legacy
done

python3 - "$OUT" << 'EOF'
import json, statistics, sys
runs = [json.loads(l) for l in open(f"{sys.argv[1]}/runs.jsonl")]
def figures(name, key):
    return [r[key] for r in runs if r["run_name"] == name]
def report(name, key):
    values = figures(name, key)
    print(f"{name}: {key} median {statistics.median(values):.1f} "
          f"(rounds: {', '.join('%.1f' % v for v in values)})")
    return statistics.median(values)
off = report("dp-linear-off", "prefill_throughput")
on = report("dp-linear-on", "prefill_throughput")
default = report("padding-default", "median_decode_throughput")
legacy = report("padding-legacy", "median_decode_throughput")
pairs = zip(figures("dp-linear-on", "prefill_throughput"), figures("dp-linear-off", "prefill_throughput"))
print(f"dp_linear on/off: {on / off:.3f} (per round: {', '.join('%.3f' % (a / b) for a, b in pairs)})")
pairs = zip(figures("padding-default", "median_decode_throughput"),
            figures("padding-legacy", "median_decode_throughput"))
print(f"padding default/legacy: {default / legacy:.3f} "
      f"(per round: {', '.join('%.3f' % (a / b) for a, b in pairs)})")
EOF
