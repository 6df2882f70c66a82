#!/usr/bin/env python3
"""Batch-1 decode speed with NEXTN speculation against without, in one run.

Starts `mlaserve serve` once per setting (no speculation, then --speculative-num-steps 1..3) on
a model with an MTP layer, sends the same greedy requests one at a time and reports output
tokens/s, the accept length (tokens per verify step, from meta_info.spec_verify_ct), the
speed against no speculation, and what a verify step (with its MTP passes) costs in decode
steps: accept length x (no speculation's speed / this speed), the accept length at which the
setting breaks even. Rounds alternate the settings so that a noisy machine hits all
of them alike.

usage: bench/speculative_ab.py MLASERVE MODEL_DIR [ROUNDS] [NEW_TOKENS] [EXTRA_FLAGS] [SAMPLING]

SAMPLING: a JSON object of more sampling parameters for every request, e.g.
'{"frequency_penalty": 0.4, "presence_penalty": 0.2, "repetition_penalty": 1.2}'.
"""
import json
import subprocess
import sys
import time
import urllib.request


def start(binary, model, flags):
    cmd = [binary, "serve", "--model", model, "--port", "0"] + flags
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "listening on http://" in line:
            port = int(line.rsplit(":", 1)[1].split()[0])
            return proc, port
    raise RuntimeError("server did not start: " + " ".join(cmd))


def generate(port, ids, new_tokens, sampling):
    params = {"temperature": 0, "max_new_tokens": new_tokens, "ignore_eos": True, **sampling}
    body = json.dumps({"input_ids": ids, "sampling_params": params}).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", body,
                                 {"Content-Type": "application/json"})
    return json.loads(urllib.request.urlopen(req).read())


def main():
    binary, model = sys.argv[1], sys.argv[2]
    rounds = int(sys.argv[3]) if len(sys.argv) > 3 else 3
    new_tokens = int(sys.argv[4]) if len(sys.argv) > 4 else 128
    extra = sys.argv[5].split() if len(sys.argv) > 5 else []
    sampling = json.loads(sys.argv[6]) if len(sys.argv) > 6 else {}
    try:  # a trained MTP layer's reference prompts, else fixed pseudo-random ones
        prompts = [c["ids"] for c in json.load(open(f"{model}/reference.json"))["mtp"]["cases"]]
    except FileNotFoundError:
        prompts = [[0] + [(97 * i + 31 * j) % 30000 + 100 for j in range(32)] for i in range(4)]
    settings = [[]] + [["--speculative-algorithm", "NEXTN", "--speculative-num-steps", str(s)]
                       for s in (1, 2, 3)]
    results = {i: [] for i in range(len(settings))}
    for _ in range(rounds):
        for i, flags in enumerate(settings):
            proc, port = start(binary, model, extra + flags)
            try:
                generate(port, prompts[0], 8, sampling)  # warm-up
                tokens = verify = 0
                began = time.perf_counter()
                for ids in prompts:
                    meta = generate(port, ids, new_tokens, sampling)["meta_info"]
                    tokens += meta["completion_tokens"]
                    verify += meta["spec_verify_ct"]
                seconds = time.perf_counter() - began
            finally:
                proc.terminate()
                proc.wait()
            results[i].append((tokens / seconds, (tokens - len(prompts)) / verify if verify else 1.0))
    base = sorted(r[0] for r in results[0])[len(results[0]) // 2]
    print(f"{'setting':<32} {'out tok/s (median)':>18} {'accept length':>14} {'vs none':>8}"
          f" {'step cost':>10}")
    for i, flags in enumerate(settings):
        speed = sorted(r[0] for r in results[i])[len(results[i]) // 2]
        accept = results[i][0][1]
        name = " ".join(flags[2:]) or "no speculation"
        print(f"{name:<32} {speed:>18.1f} {accept:>14.2f} {speed / base:>7.2f}x"
              f" {accept * base / speed:>10.2f}")


if __name__ == "__main__":
    main()
