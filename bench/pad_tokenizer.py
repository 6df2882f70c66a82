#!/usr/bin/env python3
"""Writes a copy of a tokenizer directory whose vocabulary is padded to VOCAB ids.

The bench model (random weights, vocab 32000) has no tokenizer. Serving it with brown-tiny's
(4114 ids) works for prompts, but the model samples ids the tokenizer cannot decode. The padding
ids decode to "<pad_ID>" text and are never produced by encoding (no merge reaches them), so
prompts stay brown-tiny text and every sampled id decodes.

    bench/pad_tokenizer.py models/brown-tiny 32000 /tmp/bench-500m
"""
import json
import shutil
import sys
from pathlib import Path

source, vocab_size, out = Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])
tokenizer = json.loads((source / "tokenizer.json").read_text())
taken = set(tokenizer["model"]["vocab"].values()) | {t["id"] for t in tokenizer["added_tokens"]}
for i in range(vocab_size):
    if i not in taken:
        tokenizer["model"]["vocab"][f"<pad_{i}>"] = i
out.mkdir(parents=True, exist_ok=True)
(out / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False))
shutil.copy(source / "tokenizer_config.json", out / "tokenizer_config.json")
