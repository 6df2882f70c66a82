#!/usr/bin/env bash
# Issue 13's table in one run: the bench model held as bf16 (--quantization none), FP8 (the
# checkpoint's own codes and block scales) and int8 (quantized at load), alternating round by
# round so that every format sees the same machine load; then the kernels' own figures.
#
#   bench/quantization_ab.sh MLASERVE_BIN FP8_MODEL_DIR [ROUNDS] [OUT_DIR]
#
# FORMATS (default "none fp8 int8"; the first is the ratios' base) picks the --quantization
# values, e.g. FORMATS="int8 int4 mxfp4"; EXTRA adds flags to every run (--quantize-lm-head);
# PREFILLS (default 6) is how many batches each batch-1 process runs one after another;
# PEER_BENCH (a llama-bench of llama.cpp or ik_llama.cpp) with PEER_GGUFS (GGUFs of the same
# weights, e.g. IQ4_KS and bf16 from bench/hf_to_gguf.py and llama-quantize) adds the peer to
# every round: pp512 and tg64 at depth 512, three repetitions each (PEER_TG_FLAGS: llama.cpp's
# "-p 0 -n 64 -d 512" by default; ik_llama.cpp's llama-bench has no -d: "-p 0 -n 0 -gp 512,64").
#
# FP8_MODEL_DIR: `mlaserve make-model --config bench/bench-500m.config.json --dtype fp8 --out DIR`.
# Each round runs bench-one-batch at batch 1 (input 512, output 64: prefill of 512 tokens, then
# decode at depth 512; PREFILLS such batches per process, since one 0.4 s prefill is a single
# draw of a noisy machine: on the 2-vCPU EPYC the int4 prefills of one process spread 900-1230
# tok/s) and batch 32 (input 128, output 16) for each format; the figures are medians over all
# batches. Writes
# OUT_DIR/runs.jsonl and OUT_DIR/load.txt (load average before each run), prints the median of
# each figure and its ratio to bf16, then the decode GEMV's weight stream per format
# (ops_microbench, N 2048 × K 7168, m 1: what the weight formats give against the memory stream).
set -euo pipefail
BIN=$1 MODEL=$2 ROUNDS=${3:-3} OUT=${4:-/tmp/quantization-ab}
FORMATS=${FORMATS:-none fp8 int8} EXTRA=${EXTRA:-} PREFILLS=${PREFILLS:-6}
PEER_BENCH=${PEER_BENCH:-} PEER_GGUFS=${PEER_GGUFS:-} PEER_TG_FLAGS=${PEER_TG_FLAGS:--p 0 -n 64 -d 512}
MICROBENCH=$(dirname "$BIN")/../kernels/mlaserve_kernels_microbench
mkdir -p "$OUT"
: > "$OUT/runs.jsonl"
: > "$OUT/load.txt"

run() {  # quantization batch input output [batches]
  local name="$1-bs$2" inputs
  inputs=$(printf "$3 %.0s" $(seq "${5:-1}"))
  echo "$name $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  # shellcheck disable=SC2086  # EXTRA: several flags; inputs: the same length repeated
  OMP_NUM_THREADS=2 "$BIN" bench-one-batch --model "$MODEL" --quantization "$1" $EXTRA --run-name "$name" \
    --batch-size "$2" --input-len $inputs --output-len "$4" --result-filename "$OUT/runs.jsonl" \
    > "$OUT/$name.log" 2>&1
}

peer() {  # round gguf: llama-bench's JSON (ik_llama.cpp's has no jsonl) to OUT/peer-ROUND-NAME.json
  echo "peer $(basename "$2") $(cut -d' ' -f1-3 /proc/loadavg)" >> "$OUT/load.txt"
  "$PEER_BENCH" -m "$2" -t 2 -r 3 -p 512 -n 0 -o json > "$OUT/peer-$1-$(basename "$2" .gguf)-pp.json" 2> /dev/null
  # shellcheck disable=SC2086  # several flags
  "$PEER_BENCH" -m "$2" -t 2 -r 3 $PEER_TG_FLAGS -o json \
    > "$OUT/peer-$1-$(basename "$2" .gguf)-tg.json" 2> /dev/null
}

rm -f "$OUT"/peer-*.json
for round in $(seq "$ROUNDS"); do
  echo "round $round of $ROUNDS" >&2
  for q in $FORMATS; do
    run "$q" 1 512 64 "$PREFILLS"
    run "$q" 32 128 16
  done
  if [ -n "$PEER_BENCH" ]; then
    for gguf in $PEER_GGUFS; do peer "$round" "$gguf"; done
  fi
done

python3 - "$OUT" $FORMATS << 'PY'
import json, statistics, sys
out, formats = sys.argv[1], sys.argv[2:]
runs = [json.loads(l) for l in open(f"{out}/runs.jsonl")]
def median(name, key):
    return statistics.median(r[key] for r in runs if r["run_name"] == name)
for bs in (1, 32):
    base = {k: median(f"{formats[0]}-bs{bs}", k) for k in ("prefill_throughput", "median_decode_throughput")}
    for q in formats:
        name = f"{q}-bs{bs}"
        pre, dec = median(name, "prefill_throughput"), median(name, "median_decode_throughput")
        batches = ", ".join("%.0f/%.1f" % (r["prefill_throughput"], r["median_decode_throughput"])
                            for r in runs if r["run_name"] == name)
        print(f"{name}: prefill {pre:.1f} tok/s ({pre / base['prefill_throughput']:.2f}x), decode "
              f"{dec:.1f} tok/s ({dec / base['median_decode_throughput']:.2f}x; batches, "
              f"prefill/decode: {batches})")
PY
if [ -n "$PEER_BENCH" ]; then
  python3 - "$OUT" << 'PY'
import glob, json, os, statistics, sys
rates = {}
for path in sorted(glob.glob(f"{sys.argv[1]}/peer-*.json")):
    name, test = os.path.basename(path)[:-5].split("-", 2)[2].rsplit("-", 1)
    rates.setdefault((name, test), []).extend(r["avg_ts"] for r in json.load(open(path)))
for (name, test), values in sorted(rates.items()):
    label = "prefill 512" if test == "pp" else "decode at depth 512"
    print(f"peer {name}: {label} {statistics.median(values):.1f} tok/s (rounds "
          + ", ".join("%.1f" % v for v in values) + ")")
PY
fi
for q in $FORMATS; do grep -h "resident weights" "$OUT/$q-bs1.log" | sed "s/^/$q: /" | cut -c1-400; done
"$MICROBENCH" --benchmark_filter='BM_MatmulDecode<.*(BF16|FP8|INT8|INT4|MXFP4)>/N:2048/K:7168' 2>/dev/null |
  grep BM_ | sed -E 's/ +/ /g'
