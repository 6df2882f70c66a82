#!/usr/bin/env bash
# Prefix reuse under shared-prefix load: `bench-serving --dataset shared-prefix` (GROUPS prefixes
# of PREFIX_LEN tokens, each prompt one of them plus a 64-token question, 16 new tokens) against
# `mlaserve serve` with --disable-radix-cache, then with the radix cache (DeepSeek-V4: from prefix
# snapshots), each server on a fresh loopback port; prints each table's throughput and TTFT and
# the groups' radix-cached tokens and snapshots after.
#
#   bench/prefix_reuse.sh BIN MODEL TOKENIZER PROMPTS CONCURRENCY PREFIX_LEN GROUPS
#   bench/prefix_reuse.sh build/src/tools/mlaserve /tmp/bench-v4 /tmp/bench-tok 16 4 2048 2
set -euo pipefail
bin=$1 model=$2 tokenizer=$3 prompts=$4 concurrency=$5 prefix_len=$6 groups=$7
# shellcheck source=bench/serve_lib.sh
source "$(dirname "$0")/serve_lib.sh"
report='import json, sys
e = json.load(sys.stdin)["engine"]
print("   radix-cached tokens, snapshots per group:",
      [(g["radix_cached_tokens"], g.get("prefix_snapshots", 0)) for g in e["load"]])'
for flags in "--disable-radix-cache" ""; do
  port=$((30200 + RANDOM % 500))
  start_server "$bin" "$model" "$tokenizer" "$port" "$flags"
  echo "== serve ${flags:-(radix cache on)} (load: $(cut -d' ' -f1-3 /proc/loadavg))"
  "$bin" bench-serving --base-url "http://127.0.0.1:$port" --backend mlaserve \
    --tokenizer "$tokenizer" --dataset shared-prefix --shared-prefix-len "$prefix_len" \
    --num-groups "$groups" --num-prompts "$prompts" --random-input-len 64 \
    --random-output-len 16 --random-range-ratio 1 --request-rate inf \
    --max-concurrency "$concurrency" --seed 7 --output-file /dev/null 2>/dev/null |
    sed -n '/Serving Benchmark Result/,/^=*$/p' | grep -E "duration|throughput|TTFT"
  curl -s "127.0.0.1:$port/get_server_info" | python3 -c "$report"
  stop_server
done
