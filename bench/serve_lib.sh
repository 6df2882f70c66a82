# Sourced by the serving benchmarks. start_server BIN MODEL TOKENIZER PORT "FLAGS": starts
# `mlaserve serve` on the loopback port and returns once it listens (if it dies first, prints its
# log and exits); sets $server (its pid) and $server_log. stop_server: stops it, removes the log.
start_server() {
  local bin=$1 model=$2 tokenizer=$3 port=$4 flags=$5
  server_log=$(mktemp)
  # shellcheck disable=SC2086  # the flags are a word list
  "$bin" serve --model "$model" --tokenizer "$tokenizer" --port "$port" $flags >"$server_log" 2>&1 &
  server=$!
  for _ in $(seq 600); do
    grep -q "listening on" "$server_log" && return 0
    kill -0 "$server" 2>/dev/null || { cat "$server_log"; exit 1; }
    sleep 0.5
  done
}

stop_server() {
  kill -TERM "$server" 2>/dev/null || true
  wait "$server" 2>/dev/null || true
  rm -f "$server_log"
}
