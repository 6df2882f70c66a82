#!/usr/bin/env python3
"""Renders conversations.json with DeepSeek-V3.1's chat template (chat_template.jinja) through
Python jinja2 set up as HF transformers' apply_chat_template sets it up, into renderings.json.
Run from this folder: python3 render_reference.py (needs python3-jinja2)."""
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def main():
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open("chat_template.jinja", encoding="utf-8") as f:
        template = env.from_string(f.read())
    with open("conversations.json", encoding="utf-8") as f:
        conversations = json.load(f)
    cases = []
    for conversation in conversations["conversations"]:
        for kwargs in conversations["kwargs_variants"]:
            variables = {"bos_token": "<｜begin▁of▁sentence｜>", "eos_token": "<｜end▁of▁sentence｜>",
                         "messages": conversation["messages"], "add_generation_prompt": True}
            if conversation.get("tools"):
                variables["tools"] = conversation["tools"]
            variables.update(kwargs["chat_template_kwargs"])
            cases.append({"id": f'{conversation["id"]}_{kwargs["id"]}',
                          "conversation": conversation["id"],
                          "chat_template_kwargs": kwargs["chat_template_kwargs"],
                          "rendered": template.render(**variables)})
    meta = {"template": "chat_template.jinja (DeepSeek-V3.1's tokenizer_config.json chat_template)",
            "rendered_by": f"Python jinja2 {jinja2.__version__} by render_reference.py, set up as "
                           "HF transformers' apply_chat_template: trim_blocks, lstrip_blocks, "
                           "loopcontrols, tojson with ensure_ascii=False, raise_exception; "
                           "add_generation_prompt true, tools when the conversation has them"}
    with open("renderings.json", "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
