#!/usr/bin/env python3
"""Issue 18: what structured output costs per token on the bench model, in one run.

    python3 bench/structured_output_ab.py MLASERVE_BIN MODEL_DIR TOKENIZER_DIR [ROUNDS]

Starts `serve` on the model (bf16) and, round by round, runs bench-serving (native /generate,
128 random prompt tokens, 64 output tokens, ignore_eos) at concurrency 1 (8 requests) and 32
(64 requests), once unconstrained and once per grammar, alternating so that each sees the same
machine load. The grammars cannot complete within 64 tokens, so every request generates all its
tokens: "string" keeps the output inside one JSON string (the mask allows almost every token),
"objects" is an array of at least 12 small objects (a state change every few tokens, and each
item count its own states, so many masks are computed cold). For each run it prints the output throughput, the median TPOT, and the share of the
engine's busy time spent computing token masks (grammar_mask_seconds_total over
step_seconds_total from /get_server_info, read before and after the run).
"""
import json
import statistics
import subprocess
import sys
import time
import urllib.request

BIN, MODEL, TOKENIZER = sys.argv[1:4]
ROUNDS = int(sys.argv[4]) if len(sys.argv) > 4 else 2
PORT = 30917
GRAMMARS = {
    "none": None,
    "string": {"type": "string"},
    "objects": {"type": "array", "minItems": 12, "items": {"type": "object", "properties": {
        "name": {"type": "string", "maxLength": 8}, "n": {"type": "integer"}},
        "required": ["name", "n"], "additionalProperties": False}},
}


def engine():
    with urllib.request.urlopen(f"http://127.0.0.1:{PORT}/get_server_info") as r:
        return json.load(r)["engine"]


def bench(grammar, concurrency, prompts, seed):
    extra = [] if grammar is None else [
        "--extra-request-body", json.dumps({"sampling_params": {"json_schema": json.dumps(grammar)}})]
    before = engine()
    out = subprocess.run(
        [BIN, "bench-serving", "--base-url", f"http://127.0.0.1:{PORT}", "--tokenizer", TOKENIZER,
         "--dataset", "random", "--random-input-len", "128", "--random-output-len", "64",
         "--random-range-ratio", "1", "--num-prompts", str(prompts), "--max-concurrency",
         str(concurrency), "--seed", str(seed), "--disable-progress", "--output-file", "/tmp/so_ab.jsonl",
         *extra],
        capture_output=True, text=True, check=True).stdout
    after = engine()
    mask = after["grammar_mask_seconds_total"] - before["grammar_mask_seconds_total"]
    busy = after["step_seconds_total"] - before["step_seconds_total"]
    with open("/tmp/so_ab.jsonl") as f:
        result = json.loads(f.readlines()[-1])
    tokens = after["generation_tokens_total"] - before["generation_tokens_total"]
    return (result["output_throughput"], result["median_tpot_ms"], mask / busy if busy else 0.0,
            1e6 * mask / tokens if tokens else 0.0)


server = subprocess.Popen([BIN, "serve", "--model", MODEL, "--tokenizer", TOKENIZER, "--dtype",
                           "bfloat16", "--port", str(PORT)], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL)
try:
    for _ in range(600):
        try:
            engine()
            break
        except OSError:
            time.sleep(0.5)
    figures = {}
    for round_ in range(ROUNDS):
        for concurrency, prompts in ((1, 8), (32, 64)):
            for name, grammar in GRAMMARS.items():
                # A fresh seed per run: new prompts, so no run reuses another's cached prefix.
                seed = 1000 * round_ + 10 * concurrency + len(figures)
                figures.setdefault((concurrency, name), []).append(
                    bench(grammar, concurrency, prompts, seed))
    for (concurrency, name), runs in figures.items():
        tput = statistics.median(r[0] for r in runs)
        tpot = statistics.median(r[1] for r in runs)
        share = statistics.median(r[2] for r in runs)
        per_token = statistics.median(r[3] for r in runs)
        base = statistics.median(r[1] for r in figures[(concurrency, "none")])
        print(f"concurrency {concurrency:2d} {name:8s}: output {tput:7.1f} tok/s, median TPOT "
              f"{tpot:6.1f} ms ({tpot / base:.2f}x unconstrained), masks {per_token:.1f} us per "
              f"token = {100 * share:.3f} % of busy time; TPOT runs {[round(r[1], 1) for r in runs]}")
finally:
    server.terminate()
    server.wait()
