#!/usr/bin/env python3
"""Writes derived_outputs.json: each case of derived_inputs.json encoded by DeepSeek's own
encoder. Usage: python3 make_expected.py PATH/TO/encoding_dsv4.py (the file from the encoding/
folder of DeepSeek-V4's release; it is not kept in this repo). A case's optional "context" is the
number of its first messages passed as encode_messages's context; "drop_thinking" and
"reasoning_effort" are passed when given."""
import importlib.util
import json
import sys


def encode(encoding, case):
    context = case.get("context", 0)
    messages = case["messages"]
    return encoding.encode_messages(messages[context:],
                                    thinking_mode=case["thinking_mode"],
                                    context=messages[:context] or None,
                                    drop_thinking=case.get("drop_thinking", True),
                                    add_default_bos_token=True,
                                    reasoning_effort=case.get("reasoning_effort"))


def main():
    spec = importlib.util.spec_from_file_location("encoding_dsv4", sys.argv[1])
    encoding = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(encoding)
    with open("derived_inputs.json", encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    out = [{"id": case["id"], "prompt": encode(encoding, case)} for case in cases]
    with open("derived_outputs.json", "w", encoding="utf-8") as f:
        json.dump({"cases": out}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
