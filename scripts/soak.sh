#!/usr/bin/env bash
# Soak test (issue 15): `mlaserve serve --tp 4 --dp 2 --enable-dp-attention` on models/brown-tiny
# with a KV pool small enough that running requests are retracted, under `bench-serving` load
# with faults: mixed prompt and output lengths, half the requests streamed, 5 % of the streams
# closed by their client mid-stream, 5 % of the requests aborted through /abort_request. Passes
# when no request failed (apart from the cut and aborted ones), retractions happened, every
# completed request that is re-run alone gives the same greedy tokens, the KV pool and the radix
# cache are back to their idle counts after /flush_cache, rank 0's RSS after the run is within
# 5 % of its RSS after a warm-up run, and rank 0 has no more open files than after the warm-up.
#
#   scripts/soak.sh [REQUESTS] [CONCURRENCY]      (defaults 2000 and 64)
#
# Environment (the e2e test tests/soak_test.cpp runs a small soak through these):
#   MLASERVE_BIN      the binary (default build/src/tools/mlaserve)
#   SOAK_MODEL        the model served (default models/brown-tiny; a made DeepSeek-V4 model with
#                     brown-tiny's tokenizer soaks V4's prefix snapshots)
#   SOAK_DATASET      bench-serving's dataset flags (default "--dataset random"; e.g. "--dataset
#                     shared-prefix --shared-prefix-len 200 --num-groups 4" for prefix reuse)
#   SOAK_LAYOUT       serve's parallel flags (default "--tp 4 --dp 2 --enable-dp-attention")
#   SOAK_KV_TOKENS    --max-total-tokens, each DP group's KV pool (default 3072)
#   SOAK_INPUT_LEN    longest prompt (default 400; the shortest is 1/16 of it)
#   SOAK_OUTPUT_LEN   longest output (default 128; the shortest is 1/16 of it)
#   SOAK_WARMUP       requests of the warm-up run (default REQUESTS, see below)
#   SOAK_CHECK        completed requests re-run alone, spread evenly (default "all": every one)
#   SOAK_SEED         bench-serving's seed (default 1)
#   SOAK_OUT          folder for the server log, bench-serving's output and details, summary.json
#                     (default: a new temporary folder, printed)
#
# The warm-up is a run like the measured one (other prompts, same faults), so that what fills up
# once and then stays is in the RSS it is compared with, while anything kept per request grows the
# measured run's RSS as much as it grew the warm-up's. The server claims the forward's step
# buffers for its largest possible step at start-up, so the step-time budget (which raises the
# prompt tokens per step as it measures the steps) cannot grow them later.
#
# Greedy outputs must equal the alone outputs, so the server runs with
# --enable-deterministic-inference: with it a token's result has the same bits whatever shares its
# batch, however its prompt is chunked and whether its prefix comes from the radix cache (which
# also covers a retracted request prefilled again with its output so far). Without it, bf16
# kernels reduce in batch-dependent orders and a few requests in a thousand legitimately differ;
# float32 is batch-stable only in practice, not by construction.
set -euo pipefail
cd "$(dirname "$0")/.."

REQUESTS=${1:-2000}
MODEL=${SOAK_MODEL:-models/brown-tiny}
DATASET=${SOAK_DATASET:---dataset random}
CONCURRENCY=${2:-64}
BIN=${MLASERVE_BIN:-build/src/tools/mlaserve}
LAYOUT=${SOAK_LAYOUT:---tp 4 --dp 2 --enable-dp-attention}
KV_TOKENS=${SOAK_KV_TOKENS:-3072}
INPUT_LEN=${SOAK_INPUT_LEN:-400}
OUTPUT_LEN=${SOAK_OUTPUT_LEN:-128}
WARMUP=${SOAK_WARMUP:-$REQUESTS}
CHECK=${SOAK_CHECK:-all}
SEED=${SOAK_SEED:-1}
OUT=${SOAK_OUT:-$(mktemp -d /tmp/mlaserve-soak.XXXXXX)}
mkdir -p "$OUT"
RSS_TOLERANCE_PERCENT=5

die() {
  echo "soak: $*" >&2
  exit 2
}
for tool in curl jq; do
  command -v "$tool" >/dev/null || die "$tool not found (run scripts/setup.sh)"
done
[ -x "$BIN" ] || die "no binary at $BIN (run scripts/build.sh, or set MLASERVE_BIN)"

# The server runs in a session of its own (setsid), so that its MPI ranks can be killed as a group
# if it does not stop by itself; stopped on every exit path.
server=""
stop_server() {
  [ -n "$server" ] || return 0
  kill -TERM "$server" 2>/dev/null || true
  for _ in $(seq 60); do
    kill -0 "$server" 2>/dev/null || break
    sleep 0.25
  done
  kill -KILL -- "-$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  server=""
}
trap stop_server EXIT
trap 'exit 130' INT TERM

# Control requests (abort, flush, info) must not queue behind the streams that hold every HTTP
# thread, so the server gets a few threads more than the client's concurrency.
# shellcheck disable=SC2086  # LAYOUT is a word list
setsid "$BIN" serve --model "$MODEL" --port 0 --enable-deterministic-inference \
  --max-total-tokens "$KV_TOKENS" \
  --http-threads $((CONCURRENCY + 16)) $LAYOUT \
  >"$OUT/server.log" 2>&1 &
server=$!
port=""
for _ in $(seq 600); do
  port=$(sed -n 's|.*listening on http://127\.0\.0\.1:\([0-9]*\).*|\1|p' "$OUT/server.log" | head -1)
  [ -n "$port" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$OUT/server.log"; die "the server did not start"; }
  sleep 0.5
done
[ -n "$port" ] || die "the server did not listen within 300 s (log: $OUT/server.log)"
URL=http://127.0.0.1:$port

info() { curl -sf "$URL/get_server_info"; }

# Waits until the engine runs and queues nothing (cut streams are noticed and aborted at the
# server's next write), then empties the radix cache.
settle_and_flush() {
  for _ in $(seq 600); do
    [ "$(info | jq '.engine.running_requests + .engine.waiting_requests')" = 0 ] && break
    sleep 0.1
  done
  for _ in $(seq 50); do
    curl -sf -X POST "$URL/flush_cache" >/dev/null && return 0
    sleep 0.2
  done
  return 1
}

# "used cached" token counts of every DP group, e.g. "0 0,0 0".
pool_counts() { info | jq -r '[.engine.load[] | "\(.kv_used_tokens) \(.radix_cached_tokens)"] | join(",")'; }
rss_kib() { awk '/^VmRSS:/ {print $2}' "/proc/$rank0/status"; }
# Rank 0's open files, after up to 5 s for connections the clients closed to be closed here too.
fd_count() {
  local limit=${1:-} count
  for _ in $(seq 50); do
    count=$(find "/proc/$rank0/fd" -mindepth 1 -maxdepth 1 | wc -l)
    if [ -z "$limit" ] || [ "$count" -le "$limit" ]; then break; fi
    sleep 0.1
  done
  echo "$count"
}

# bench-serving with this soak's traffic; $1: requests, $2: seed, $3: file prefix.
bench() {
  # shellcheck disable=SC2086  # DATASET is a word list
  "$BIN" bench-serving --base-url "$URL" --backend mlaserve $DATASET \
    --num-prompts "$1" --random-input-len "$INPUT_LEN" --random-output-len "$OUTPUT_LEN" \
    --random-range-ratio 0.0625 --request-rate inf --max-concurrency "$CONCURRENCY" \
    --stream-fraction 0.5 --disconnect-fraction 0.05 --abort-fraction 0.05 --seed "$2" \
    --disable-progress --output-file "$OUT/$3.jsonl" --output-details "$OUT/$3-details.jsonl" \
    >"$OUT/$3.txt" 2>&1
}

failures=()
check() { # check CONDITION-COMMAND... -- MESSAGE
  local message=${*: -1}
  "${@:1:$#-2}" || failures+=("$message")
}

rank0=$(info | jq -r .pid)
echo "soak: serve $LAYOUT on 127.0.0.1:$port, rank 0 pid $rank0, output in $OUT"
echo "soak: warm-up, $WARMUP requests at concurrency $CONCURRENCY"
bench "$WARMUP" $((SEED + 1000)) warmup || die "the warm-up run failed: $(tail -3 "$OUT/warmup.txt")"
settle_and_flush || die "/flush_cache after the warm-up kept failing"
idle_counts=$(pool_counts)
rss_before=$(rss_kib)
fds_before=$(fd_count)
retractions_before=$(info | jq .engine.retractions_total)

echo "soak: $REQUESTS requests at concurrency $CONCURRENCY"
start=$EPOCHREALTIME
bench_status=0
bench "$REQUESTS" "$SEED" run || bench_status=$?
duration=$(awk -v a="$start" -v b="$EPOCHREALTIME" 'BEGIN {printf "%.1f", b - a}')
check [ "$bench_status" = 0 ] -- "bench-serving exited with status $bench_status (see $OUT/run.txt)"
flushed=yes
settle_and_flush || flushed=no
check [ "$flushed" = yes ] -- "/flush_cache kept failing after the run: requests still running?"
counts_after=$(pool_counts)
check [ "$counts_after" = "$idle_counts" ] -- \
  "KV pool and radix cache (used cached per group) $counts_after after /flush_cache, idle: $idle_counts"
rss_after=$(rss_kib)
fds_after=$(fd_count "$fds_before")
retractions=$(($(info | jq .engine.retractions_total) - retractions_before))

details=$OUT/run-details.jsonl
count() { jq -s "[.[] | select($1)] | length" "$details"; }
ok=$(count '.outcome == "ok"')
cut=$(count '.outcome == "cut"')
aborted=$(count '.outcome == "aborted"')
failed=$(count '.outcome == "failed"')
planned_cuts=$(count 'has("disconnect_after")')
planned_aborts=$(count 'has("abort_delay_s")')
check [ "$failed" = 0 ] -- "$failed requests failed, the first: $(jq -r 'select(.outcome == "failed") | .error' "$details" | head -1)"
check [ $((ok + cut + aborted + failed)) = "$REQUESTS" ] -- "the details list $((ok + cut + aborted + failed)) of $REQUESTS requests"
check [ "$cut" = "$planned_cuts" ] -- "$cut streams cut, $planned_cuts planned"
check [ "$aborted" -gt 0 ] -- "no request was aborted ($planned_aborts planned)"
check [ "$retractions" -gt 0 ] -- "no retraction: the KV pool ($KV_TOKENS tokens per group) is not small enough"
rss_limit=$((rss_before * (100 + RSS_TOLERANCE_PERCENT) / 100))
check [ "$rss_after" -le "$rss_limit" ] -- "rank 0's RSS grew from $rss_before to $rss_after KiB (over $RSS_TOLERANCE_PERCENT %)"
check [ "$fds_after" -le "$fds_before" ] -- "rank 0's open files grew from $fds_before to $fds_after"

# The completed requests (every one, or $CHECK spread evenly) one at a time, against the tokens
# they got under load.
step=1
[ "$CHECK" = all ] || [ "$ok" -le "$CHECK" ] || step=$(((ok + CHECK - 1) / CHECK))
jq -c 'select(.outcome == "ok")' "$details" | awk -v step="$step" '(NR - 1) % step == 0' >"$OUT/alone-sample.jsonl"
compared=0
mismatches=0
while IFS= read -r line; do
  body=$(jq -c '{text: .prompt, sampling_params: {temperature: 0, max_new_tokens: .max_new_tokens,
    ignore_eos: .ignore_eos}}' <<<"$line")
  alone=$(curl -sf "$URL/generate" -H 'Content-Type: application/json' -d "$body" | jq -c .output_ids)
  if [ "$alone" != "$(jq -c .output_ids <<<"$line")" ]; then
    mismatches=$((mismatches + 1))
    echo "soak: request $(jq .index <<<"$line") differs alone: $alone" >>"$OUT/mismatches.txt"
  fi
  compared=$((compared + 1))
done <"$OUT/alone-sample.jsonl"
check [ "$compared" -gt 0 ] -- "no completed request to re-run alone"
check [ "$mismatches" = 0 ] -- "$mismatches of $compared requests gave other tokens alone (see $OUT/mismatches.txt)"

summary=$(jq -n --argjson requests "$REQUESTS" --argjson concurrency "$CONCURRENCY" \
  --argjson ok "$ok" --argjson cut "$cut" --argjson aborted "$aborted" --argjson failed "$failed" \
  --argjson retractions "$retractions" --argjson rss_before_kib "$rss_before" \
  --argjson rss_after_kib "$rss_after" --argjson fds_before "$fds_before" \
  --argjson fds_after "$fds_after" --argjson duration_s "$duration" \
  --argjson compared_alone "$compared" --argjson mismatches "$mismatches" \
  --arg pool_idle "$idle_counts" --arg pool_after "$counts_after" \
  --argjson failures "$(printf '%s\n' "${failures[@]}" | jq -R . | jq -sc 'map(select(. != ""))')" \
  '$ARGS.named')
echo "$summary" >"$OUT/summary.json"
sed -n '/Serving Benchmark Result/,/^=*$/p' "$OUT/run.txt" | grep -vE "^-|ITL|TPOT" || true
cat <<EOF
soak: $REQUESTS requests at concurrency $CONCURRENCY in $duration s: $ok ok, $cut cut, $aborted aborted, $failed failed
soak: $retractions retractions; KV pool and radix cache (used cached per group) idle $idle_counts, after the run $counts_after
soak: rank 0 RSS $rss_before -> $rss_after KiB, open files $fds_before -> $fds_after
soak: $compared completed requests re-run alone, $mismatches differ
EOF
if [ ${#failures[@]} -gt 0 ]; then
  printf 'soak: FAILED: %s\n' "${failures[@]}" >&2
  exit 1
fi
echo "soak: PASS"
