#!/usr/bin/env python3
"""Runs deepseek_reference.py on the prompts of the golden models and compares with their reference
files. Prints one line per prompt and exits non-zero on a mismatch.

    python3 tests/reference/check_golden.py [--demo DIR_OF_SHARED_DEMOS] [--only NAME ...]

Golden models (format of tests/data/models/README.md: float32 logits.bin) are compared on the
last-position logits and every greedy step's logits (relative L2 and max |diff| / max |ref|) and the
greedy ids. The demo models (brown-tiny, brown-tiny-dsa: float64 top10 logits) are compared on the
top-10 ids and logits (max relative difference) and the greedy ids.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile

try:
    import numpy as np
except ImportError:                 # e.g. a pyenv python3 ahead of Debian's, which has python3-numpy
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(HERE, "deepseek_reference.py")


def run_reference(model_dir, prompts, n_new):
    with tempfile.TemporaryDirectory() as td:
        inp, out = os.path.join(td, "in.json"), os.path.join(td, "out.json")
        with open(inp, "w") as f:
            json.dump({"prompts": [{"ids": p} for p in prompts]}, f)
        subprocess.run([sys.executable, SCRIPT, "--model", model_dir, "--input", inp, "--output", out,
                        "--max-new-tokens", str(n_new)], check=True)
        with open(out) as f:
            return json.load(f)


def rel_l2(a, b):
    return float(np.linalg.norm(a - b) / np.linalg.norm(b))


def check_golden(model_dir):
    ref = json.load(open(os.path.join(model_dir, "reference.json")))
    raw = np.fromfile(os.path.join(model_dir, ref["logits_file"]), dtype="<f4").astype(np.float64)

    def get(spec):
        o = spec["offset"] // 4
        return raw[o:o + int(np.prod(spec["shape"]))].reshape(spec["shape"])

    out = run_reference(model_dir, [p["ids"] for p in ref["prompts"]], ref["n_greedy"])
    ok = True
    worst = 0.0
    for rp, op in zip(ref["prompts"], out["prompts"]):
        last = np.array(op["last_logits"])
        steps = np.array(op["greedy_logits"])
        rl = rel_l2(last, get(rp["last_logits"]))
        rs = max(rel_l2(s, r) for s, r in zip(steps, get(rp["greedy_step_logits"])))
        ra = float(np.max(np.abs(steps - get(rp["greedy_step_logits"]))) / np.max(np.abs(get(rp["greedy_step_logits"]))))
        same = op["greedy"] == rp["greedy"]
        # the golden logits are float32 roundings of a float64 forward: count the values whose
        # float32 rounding differs from ours (by at most one float32 ulp when they do)
        mine = np.concatenate([last, steps.ravel()]).astype(np.float32)
        theirs = np.concatenate([get(rp["last_logits"]), get(rp["greedy_step_logits"]).ravel()]).astype(np.float32)
        ne = int(np.sum(mine != theirs))
        ulps = int(np.max(np.abs(mine.view(np.int32).astype(np.int64) - theirs.view(np.int32).astype(np.int64))))
        worst = max(worst, rl, rs)
        good = same and rl < 1e-6 and rs < 1e-6
        ok &= good
        print(f"  T={len(rp['ids']):4d} last rel_l2 {rl:.2e}  greedy-step max rel_l2 {rs:.2e}  "
              f"max|d|/max|ref| {ra:.2e}  f32 values differing {ne}/{mine.size} (max {ulps} ulp)  greedy {'identical' if same else 'DIFFERENT'}"
              f"  router gap {op.get('min_router_gap')}  {'ok' if good else 'FAIL'}")
    return ok, worst


def check_demo(model_dir):
    ref = json.load(open(os.path.join(model_dir, "reference.json")))
    ok = True
    worst = 0.0
    # prompts may have different greedy lengths: run each with its own
    for rp in ref["prompts"]:
        op = run_reference(model_dir, [rp["ids"]], len(rp["greedy_ids"]))["prompts"][0]
        last = np.array(op["last_logits"])
        top = [int(i) for i in np.argsort(-last, kind="stable")[:10]]
        rl = np.array(rp["top10_logits"])
        rel = float(np.max(np.abs(last[rp["top10_ids"]] - rl) / np.abs(rl)))
        same_top = top == rp["top10_ids"]
        same = op["greedy"] == rp["greedy_ids"]
        worst = max(worst, rel)
        good = same and same_top and rel < 1e-9
        ok &= good
        extra = ""
        if "min_selection_margin" in op:
            refm = rp.get("dsa", {}).get("min_index_rel_gap")
            m = op["min_selection_margin"]
            extra = f"  min selection margin {m} (reference.json {refm})"
            good_m = refm is None or (m is not None and abs(m - refm) <= 1e-9 * abs(refm) + 1e-15)
            extra += "" if good_m else " MISMATCH"
            good &= good_m
            ok &= good_m
        print(f"  T={len(rp['ids']):4d} top10 ids {'identical' if same_top else 'DIFFERENT'}  top10 max rel {rel:.2e}"
              f"  greedy({len(op['greedy'])}) {'identical' if same else 'DIFFERENT'}{extra}  {'ok' if good else 'FAIL'}")
    return ok, worst


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--demo", default=os.path.join(os.path.dirname(REPO), "shared", "demo"))
    ap.add_argument("--only", nargs="*")
    a = ap.parse_args()
    cases = [("tiny-v2", check_golden, os.path.join(REPO, "tests/data/models/tiny-v2")),
             ("tiny-v3", check_golden, os.path.join(REPO, "tests/data/models/tiny-v3")),
             ("tiny-v3-fp8", check_golden, os.path.join(REPO, "tests/data/models/tiny-v3-fp8")),
             ("brown-tiny", check_demo, os.path.join(a.demo, "brown-tiny")),
             ("brown-tiny-dsa", check_demo, os.path.join(a.demo, "brown-tiny-dsa"))]
    all_ok = True
    for name, fn, d in cases:
        if a.only and name not in a.only:
            continue
        if not os.path.isdir(d):
            print(f"{name}: {d} missing, skipped")
            continue
        print(f"{name}:")
        ok, worst = fn(d)
        print(f"  -> {'OK' if ok else 'FAIL'} (worst {worst:.2e})")
        all_ok &= ok
    return 0 if all_ok else 1


if __name__ == "__main__":
    sys.exit(main())
