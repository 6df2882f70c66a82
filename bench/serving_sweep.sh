#!/usr/bin/env bash
# Serving throughput sweep (issue 5): starts `mlaserve serve` with the given flags on a loopback
# port, warms it up on 8 prompts of their own, runs `bench-serving` at each concurrency (each on
# prompts no earlier run sent, so nothing comes from the radix cache), prints each table and rank
# 0's scheduling time against the busy step time, and stops the server.
#
#   bench/serving_sweep.sh BIN MODEL TOKENIZER "SERVE FLAGS" "CONCURRENCIES" PROMPTS INPUT_LEN OUTPUT_LEN
#   bench/serving_sweep.sh build/src/tools/mlaserve /tmp/bench-500m /tmp/bench-tok "--tp 2" "8 32" 32 256 64
# (the bench model has no tokenizer: bench/pad_tokenizer.py makes one from brown-tiny's)
# EXTRA_BODY (a JSON object) is merged into every request, e.g.
# '{"sampling_params": {"temperature": 0.6, "top_p": 0.95}}' to sample instead of greedy.
set -euo pipefail
bin=$1 model=$2 tokenizer=$3 flags=$4 concurrencies=$5 prompts=$6 input_len=$7 output_len=$8
port=${PORT:-30123}
# shellcheck source=bench/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"
start_server "$bin" "$model" "$tokenizer" "$port" "$flags"
trap stop_server EXIT
echo "== serve $flags (load: $(cut -d' ' -f1-3 /proc/loadavg))"
report='import json, sys
e = json.load(sys.stdin)["engine"]
print("   scheduling %.3f s of %.1f s busy, %d steps" % (e["schedule_seconds_total"], e["step_seconds_total"], e["steps"]))'
# bench_run PROMPTS CONCURRENCY SEED: one bench-serving run against the server.
bench_run() {
  "$bin" bench-serving --base-url "http://127.0.0.1:$port" --backend mlaserve --tokenizer "$tokenizer" \
    --dataset random --num-prompts "$1" --random-input-len "$input_len" \
    --random-output-len "$output_len" --random-range-ratio 1 --request-rate inf \
    --max-concurrency "$2" --seed "$3" --extra-request-body "${EXTRA_BODY:-{\}}" \
    --output-file /dev/null 2>/dev/null
}
bench_run 8 8 1 >/dev/null
for c in $concurrencies; do
  bench_run "$prompts" "$c" $((100 + c)) |
    sed -n '/Serving Benchmark Result/,/^=*$/p' | grep -vE "^=|^-|Backend|Traffic|retokenized"
  curl -s "127.0.0.1:$port/get_server_info" | python3 -c "$report"
done
