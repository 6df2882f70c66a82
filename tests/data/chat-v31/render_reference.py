#!/usr/bin/env python3
"""Renders a folder's conversations.json with chat templates through Python jinja2 set up as HF
transformers' apply_chat_template sets it up, into renderings.json (needs python3-jinja2).

Run from the folder: python3 render_reference.py (DeepSeek-V3.1's chat_template.jinja, this
folder), or python3 ../chat-v31/render_reference.py --bos '[BOS]' --eos '[EOS]' T1.jinja T2.jinja
to render every conversation with each template named (a conversation's "templates" list, when
it has one, says which of them render it)."""
import argparse
import json

import jinja2
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def tojson(value, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent,
                      separators=separators, sort_keys=sort_keys)


def load_template(path):
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    with open(path, encoding="utf-8", newline="") as f:
        return env.from_string(f.read())


def render_all(args, conversations):
    several = len(args.templates) > 1
    cases = []
    for template_path in args.templates:
        template = load_template(template_path)
        for conversation in conversations["conversations"]:
            if template_path not in conversation.get("templates", [template_path]):
                continue
            for kwargs in conversations["kwargs_variants"]:
                variables = {"bos_token": args.bos, "eos_token": args.eos,
                             "messages": conversation["messages"], "add_generation_prompt": True}
                if conversation.get("tools"):
                    variables["tools"] = conversation["tools"]
                variables.update(kwargs["chat_template_kwargs"])
                case_id = f'{conversation["id"]}_{kwargs["id"]}'
                case = {"id": f'{template_path.split(".")[0]}_{case_id}' if several else case_id}
                if several:
                    case["template"] = template_path
                case.update({"conversation": conversation["id"],
                             "chat_template_kwargs": kwargs["chat_template_kwargs"],
                             "rendered": template.render(**variables)})
                cases.append(case)
    return cases


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("templates", nargs="*", default=["chat_template.jinja"])
    parser.add_argument("--bos", default="<｜begin▁of▁sentence｜>")
    parser.add_argument("--eos", default="<｜end▁of▁sentence｜>")
    parser.add_argument("--description", default="DeepSeek-V3.1's tokenizer_config.json chat_template")
    args = parser.parse_args()
    with open("conversations.json", encoding="utf-8") as f:
        conversations = json.load(f)
    cases = render_all(args, conversations)
    meta = {"template": f'{", ".join(args.templates)} ({args.description})',
            "rendered_by": f"Python jinja2 {jinja2.__version__} by render_reference.py, set up as "
                           "HF transformers' apply_chat_template: trim_blocks, lstrip_blocks, "
                           "loopcontrols, tojson with ensure_ascii=False, raise_exception; "
                           "add_generation_prompt true, tools when the conversation has them"}
    with open("renderings.json", "w", encoding="utf-8") as f:
        json.dump({"meta": meta, "cases": cases}, f, ensure_ascii=False, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
