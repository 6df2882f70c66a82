#!/usr/bin/env python3
"""Issue 32's priority figure: a high-priority request's time to first token (TTFT) on an idle
server, and on a server saturated by low-priority requests, with --enable-priority-scheduling
(preemption) and without it (first come, first served), in one run.

    bench/priority_ttft.py MLASERVE_BIN [--probes 5] [--load 32] [--running 8]
                           [--load-tokens 1024] [--server-flags "--model DIR --tokenizer DIR"]

Each setting starts `serve` on 127.0.0.1 (--max-running-requests RUNNING), warms it up, then
sends PROBES high-priority streamed completions (16 tokens; each prompt new to the prefix cache)
one after another, measuring the
time from sending each to its first content chunk. Saturated settings first start LOAD clients
that each send low-priority streamed completions (ignore_eos, LOAD_TOKENS tokens) one after
another until the probes are done, so RUNNING requests run and the rest wait the whole time. Prints the median TTFT of each setting and the ratios.
"""
import argparse
import http.client
import json
import random
import re
import statistics
import subprocess
import threading
import time


def start_server(binary, server_flags, running, priority):
    cmd = [binary, "serve", "--host", "127.0.0.1", "--port", "0",
           "--max-running-requests", str(running)] + server_flags.split()
    if priority:
        cmd.append("--enable-priority-scheduling")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        found = re.search(r"listening on http://127\.0\.0\.1:(\d+)", line)
        if found:
            threading.Thread(target=lambda: [None for _ in proc.stdout], daemon=True).start()
            return proc, int(found.group(1))
    raise RuntimeError("server did not start")


def stream_completion(port, body, first_chunk=None, stop=None):
    """POSTs a streamed completion; calls first_chunk() at its first content chunk."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    conn.request("POST", "/v1/completions", json.dumps(dict(body, stream=True)),
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    seen = False
    for raw in response:
        if stop is not None and stop.is_set():
            break
        line = raw.decode().strip()
        if not line.startswith("data: ") or line == "data: [DONE]":
            continue
        chunk = json.loads(line[6:])
        if not seen and chunk.get("choices") and chunk["choices"][0].get("text"):
            seen = True
            if first_chunk:
                first_chunk()
    conn.close()


def load_client(port, body, stop):
    while not stop.is_set():
        stream_completion(port, body, None, stop)


def probe_ttfts(port, probes, priority, tag):
    """TTFTs of `probes` requests whose prompts no earlier request shares beyond its first word
    (the radix cache must not turn a probe's prefill into a one-token step)."""
    ttfts = []
    for i in range(probes):
        body = {"prompt": f"{tag} {i} {random.randrange(10**9)}: the jury said",
                "max_tokens": 16, "temperature": 0}
        if priority:
            body["priority"] = 10
        sent = time.perf_counter()
        marks = []
        stream_completion(port, body, first_chunk=lambda: marks.append(time.perf_counter()))
        ttfts.append(marks[0] - sent)
    return ttfts


def run_setting(args, saturated, priority):
    proc, port = start_server(args.binary, args.server_flags, args.running, priority)
    stop = threading.Event()
    try:
        probe_ttfts(port, 2, priority, "Warm")
        load = []
        if saturated:
            for i in range(args.load):
                body = {"prompt": f"Load {i}: once upon a time", "max_tokens": args.load_tokens,
                        "ignore_eos": True, "temperature": 0}
                if priority:
                    body["priority"] = 0
                thread = threading.Thread(target=load_client, args=(port, body, stop), daemon=True)
                thread.start()
                load.append(thread)
            time.sleep(2.0)  # every load request admitted or queued
        return probe_ttfts(port, args.probes, priority, "Probe")
    finally:
        stop.set()
        proc.terminate()
        proc.wait(timeout=30)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("binary")
    parser.add_argument("--server-flags", default="", help="extra serve flags (model, layout)")
    parser.add_argument("--load-tokens", type=int, default=1024)
    parser.add_argument("--probes", type=int, default=5)
    parser.add_argument("--load", type=int, default=32)
    parser.add_argument("--running", type=int, default=8)
    args = parser.parse_args()
    settings = [("idle", False, True), ("saturated, priority", True, True),
                ("saturated, fcfs", True, False)]
    medians = {}
    for name, saturated, priority in settings:
        ttfts = run_setting(args, saturated, priority)
        medians[name] = statistics.median(ttfts)
        print(f"{name:22s} TTFT median {medians[name] * 1e3:8.1f} ms  "
              f"(each: {', '.join(f'{t * 1e3:.0f}' for t in ttfts)})", flush=True)
    idle = medians["idle"]
    for name in medians:
        print(f"{name:22s} {medians[name] / idle:6.2f}x idle")


if __name__ == "__main__":
    main()
