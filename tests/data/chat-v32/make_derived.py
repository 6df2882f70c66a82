#!/usr/bin/env python3
"""Writes derived_outputs.json: each case of derived_inputs.json encoded by DeepSeek's own
encoder. Usage: python3 make_derived.py PATH/TO/encoding_dsv32.py (the file from the
deepseek-ai/DeepSeek-V3.2 HuggingFace repo, encoding/ folder; it is not kept in this repo)."""
import importlib.util
import json
import sys


def main():
    spec = importlib.util.spec_from_file_location("encoding_dsv32", sys.argv[1])
    encoding = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(encoding)
    with open("derived_inputs.json", encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = []
    for case in cases:
        out.append({"id": case["id"], "thinking_mode": case["thinking_mode"],
                    "prompt": encoding.encode_messages(case["messages"],
                                                       thinking_mode=case["thinking_mode"],
                                                       drop_thinking=True,
                                                       add_default_bos_token=True)})
    with open("derived_outputs.json", "w", encoding="utf-8") as f:
        json.dump({"cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
