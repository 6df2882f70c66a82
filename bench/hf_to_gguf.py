#!/usr/bin/env python3
"""Converts a DeepSeek-V3-architecture HF model directory into a BF16 GGUF for llama.cpp.

It exists so llama.cpp can be benchmarked on the same bench model as mlaserve without torch or
transformers (which llama.cpp's own convert_hf_to_gguf.py needs). It reads config.json, the
safetensors weights (model.safetensors or a sharded model.safetensors.index.json) and
tokenizer.json / tokenizer_config.json, and writes the tensors and metadata keys that llama.cpp's
`deepseek2` architecture loads:

- MLA attention: attn_q_a / attn_q_a_norm / attn_q_b (or attn_q without q-LoRA), attn_kv_a_mqa,
  attn_kv_a_norm, attn_output, and kv_b_proj split per head into attn_k_b (transposed) and
  attn_v_b; head_count_kv is written as 1 (MLA runs as MQA over the latent).
- Leading dense FFN blocks (first_k_dense_replace), then MoE blocks: ffn_gate_inp (F32), the
  noaux_tc correction bias as exp_probs_b.bias (F32), routed experts stacked into 3-D
  ffn_{gate,up,down}_exps, shared experts as ffn_{gate,up,down}_shexp.
- Hyper-parameters: lora ranks, MLA key/value lengths, expert counts, groups, sigmoid/softmax
  gating, weights norm/scale, YaRN rope scaling (log multiplier stored as 0.1 * mscale_all_dim,
  as llama.cpp expects), leading dense block count.
- DeepSeek-V3.2 (model_type deepseek_v32): llama.cpp's `deepseek32` architecture, with each
  layer's lightning indexer (indexer.attn_q_b, indexer.attn_k, indexer.k_norm weight and bias,
  indexer.proj = weights_proj) and its head count, key length and top-k.
- Vocabulary: byte-level BPE ("gpt2" tokenizer model) with merges, pre-tokenizer "deepseek-v3"
  by default; ids missing from tokenizer.json become unused "[PAD<id>]" tokens.

Matrices are written as BF16 (raw bits copied from BF16 safetensors; F32/F16 sources are
rounded to BF16) or, with --outtype q8_0, as Q8_0 (gguf-py's quantizer, which matches
llama-quantize's; token_embd and output included, as llama-quantize writes a Q8_0 model);
1-D tensors, norms and the router as F32. MTP (next-n) layers are skipped.

Needs only numpy and llama.cpp's gguf-py package (Debian: apt-get install python3-numpy
python3-yaml; run with the system /usr/bin/python3 if another python lacks numpy):

    PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 bench/hf_to_gguf.py \\
        /tmp/bench-500m /tmp/bench-500m-bf16.gguf

Options: --pre NAME sets tokenizer.ggml.pre (default deepseek-v3); --name sets general.name;
--outtype bf16|q8_0|f32 (default bf16); --whole-kv-b writes ik_llama.cpp's MLA layout (attn_kv_b
whole, head_count_kv = heads) for its quantizer and llama-bench.

A DeepSeek-V4 directory (model_type deepseek_v4, DeepSeek's released layout: FP8 / FP4 weights
with E8M0 scales) is converted by hf_to_gguf_v4.py to llama.cpp's `deepseek4` architecture, with
the same command line; it needs the gguf-py of a llama.cpp with deepseek4 (node-llama-cpp 3.22.1's
bundle has it). A directory without tokenizer.json (a random test model) gets tokenizer model
"none", which llama.cpp runs by token ids.
"""
import argparse
import json
import re
import struct
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:  # pragma: no cover - environment message
    sys.exit("gguf module not found: set PYTHONPATH to llama.cpp's gguf-py directory")


# ---------------------------------------------------------------------------------------------
# safetensors reading (memory-mapped, no external dependencies)

_ST_DTYPES = {
    "BF16": np.uint16,  # kept as raw bits
    "F16": np.float16,
    "F32": np.float32,
    "F64": np.float64,
    "I64": np.int64,
    "I32": np.int32,
    # DeepSeek-V4's formats, kept as raw bytes: hf_to_gguf_v4.py decodes them
    "F8_E4M3": np.uint8,
    "F8_E8M0": np.uint8,
    "I8": np.int8,
}


class SafetensorsDir:
    """Maps tensor name -> (dtype string, numpy view) across one or more safetensors files."""

    def __init__(self, model_dir: Path):
        index = model_dir / "model.safetensors.index.json"
        if index.exists():
            files = sorted(set(json.loads(index.read_text())["weight_map"].values()))
        else:
            files = sorted(p.name for p in model_dir.glob("*.safetensors"))
        if not files:
            raise FileNotFoundError(f"no safetensors files in {model_dir}")
        self.tensors: dict[str, tuple[str, np.ndarray]] = {}
        self.used: set[str] = set()
        for fname in files:
            self._open(model_dir / fname)

    def _open(self, path: Path) -> None:
        with open(path, "rb") as f:
            (header_len,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(header_len))
        data = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + header_len)
        for name, info in header.items():
            if name == "__metadata__":
                continue
            dtype = info["dtype"]
            if dtype not in _ST_DTYPES:
                raise ValueError(f"{name}: unsupported safetensors dtype {dtype}")
            begin, end = info["data_offsets"]
            arr = data[begin:end].view(_ST_DTYPES[dtype]).reshape(info["shape"])
            self.tensors[name] = (dtype, arr)

    def has(self, name: str) -> bool:
        return name in self.tensors

    def get(self, name: str) -> tuple[str, np.ndarray]:
        if name not in self.tensors:
            raise KeyError(f"tensor {name!r} not found in the model")
        self.used.add(name)
        return self.tensors[name]

    def unused(self, skipped) -> list[str]:
        """Tensors never read, except those skipped(name) says are left out on purpose."""
        return sorted(n for n in self.tensors if n not in self.used and not skipped(n))


def to_bf16_bits(dtype: str, arr: np.ndarray) -> np.ndarray:
    """Returns BF16 bits (uint16). BF16 input is passed through; floats are rounded to nearest even."""
    if dtype == "BF16":
        return arr
    f = np.ascontiguousarray(arr, dtype=np.float32)
    bits = f.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16
    out = rounded.astype(np.uint16)
    nan = np.isnan(f)
    if nan.any():
        out[nan] = 0x7FC0
    return out


def to_f32(dtype: str, arr: np.ndarray) -> np.ndarray:
    if dtype == "BF16":
        return (np.asarray(arr).astype(np.uint32) << 16).view(np.float32)
    return np.asarray(arr).astype(np.float32)


# ---------------------------------------------------------------------------------------------
# conversion


class Converter:
    ARCH = gguf.MODEL_ARCH.DEEPSEEK2
    USE_TEMP_FILE = False

    def __init__(self, model_dir: Path, out_path: Path, pre: str, name: str | None,
                 outtype: str = "bf16", whole_kv_b: bool = False):
        self.dir = model_dir
        self.outtype = outtype
        self.whole_kv_b = whole_kv_b
        self.cfg = json.loads((model_dir / "config.json").read_text())
        self.st = SafetensorsDir(model_dir)
        self.sparse = self.cfg.get("model_type") == "deepseek_v32"
        arch = gguf.MODEL_ARCH.DEEPSEEK32 if self.sparse else self.ARCH
        self.writer = gguf.GGUFWriter(str(out_path), gguf.MODEL_ARCH_NAMES[arch],
                                      use_temp_file=self.USE_TEMP_FILE)
        self.pre = pre
        self.name = name or model_dir.name
        self.n_matrices = 0
        self.n_f32 = 0

    # -- tensors --------------------------------------------------------------------------

    def put_matrix(self, gguf_name: str, dtype: str, arr: np.ndarray) -> None:
        if self.outtype == "q8_0":
            q8 = gguf.GGMLQuantizationType.Q8_0
            data = gguf.quants.quantize(np.ascontiguousarray(to_f32(dtype, arr)), q8)
            self.writer.add_tensor(gguf_name, data, raw_shape=data.shape, raw_dtype=q8)
        elif self.outtype == "f32":
            self.writer.add_tensor(gguf_name, np.ascontiguousarray(to_f32(dtype, arr)))
        else:
            bits = np.ascontiguousarray(to_bf16_bits(dtype, arr))
            self.writer.add_tensor(gguf_name, bits, raw_shape=bits.shape,
                                   raw_dtype=gguf.GGMLQuantizationType.BF16)
        self.n_matrices += 1

    def put_f32(self, gguf_name: str, dtype: str, arr: np.ndarray) -> None:
        self.writer.add_tensor(gguf_name, np.ascontiguousarray(to_f32(dtype, arr)))
        self.n_f32 += 1

    def hf(self, name: str) -> tuple[str, np.ndarray]:
        return self.st.get(name)

    def skipped_source(self, name: str) -> bool:
        """MTP layers (index >= num_hidden_layers) are not converted."""
        m = re.match(r"model\.layers\.(\d+)\.", name)
        return bool(m) and int(m.group(1)) >= self.cfg["num_hidden_layers"]

    def add_tensors(self) -> None:
        c = self.cfg
        n_layer = c["num_hidden_layers"]
        n_head = c["num_attention_heads"]
        nope = c["qk_nope_head_dim"]
        v_dim = c["v_head_dim"]
        kv_lora = c["kv_lora_rank"]
        n_dense = c.get("first_k_dense_replace")
        has_moe = c.get("n_routed_experts") is not None
        if n_dense is None:
            n_dense = 0 if has_moe else n_layer
        n_expert = c.get("n_routed_experts") or 0
        freq = c.get("moe_layer_freq", 1)
        if has_moe and freq != 1:
            raise ValueError("moe_layer_freq != 1 is not supported by llama.cpp's deepseek2")

        self.put_matrix("token_embd.weight", *self.hf("model.embed_tokens.weight"))

        for i in range(n_layer):
            p = f"model.layers.{i}."
            b = f"blk.{i}."
            self.put_f32(b + "attn_norm.weight", *self.hf(p + "input_layernorm.weight"))
            if c.get("q_lora_rank"):
                self.put_matrix(b + "attn_q_a.weight", *self.hf(p + "self_attn.q_a_proj.weight"))
                self.put_f32(b + "attn_q_a_norm.weight", *self.hf(p + "self_attn.q_a_layernorm.weight"))
                self.put_matrix(b + "attn_q_b.weight", *self.hf(p + "self_attn.q_b_proj.weight"))
            else:
                self.put_matrix(b + "attn_q.weight", *self.hf(p + "self_attn.q_proj.weight"))
            self.put_matrix(b + "attn_kv_a_mqa.weight", *self.hf(p + "self_attn.kv_a_proj_with_mqa.weight"))
            self.put_f32(b + "attn_kv_a_norm.weight", *self.hf(p + "self_attn.kv_a_layernorm.weight"))

            # kv_b_proj: [n_head * (nope + v), kv_lora] -> per head k part [nope, kv_lora]
            # (stored transposed as [kv_lora, nope]) and v part [v, kv_lora].
            dt, kv_b = self.hf(p + "self_attn.kv_b_proj.weight")
            if kv_b.shape != (n_head * (nope + v_dim), kv_lora):
                raise ValueError(f"layer {i}: unexpected kv_b_proj shape {kv_b.shape}")
            if self.whole_kv_b:  # ik_llama.cpp derives k_b / v_b from the whole tensor itself
                self.put_matrix(b + "attn_kv_b.weight", dt, np.asarray(kv_b))
            else:
                per_head = np.asarray(kv_b).reshape(n_head, nope + v_dim, kv_lora)
                k_b = per_head[:, :nope, :].transpose(0, 2, 1)  # [n_head, kv_lora, nope]
                v_b = per_head[:, nope:, :]                     # [n_head, v, kv_lora]
                self.put_matrix(b + "attn_k_b.weight", dt, k_b)
                self.put_matrix(b + "attn_v_b.weight", dt, v_b)

            self.put_matrix(b + "attn_output.weight", *self.hf(p + "self_attn.o_proj.weight"))
            if self.sparse:
                self.add_indexer(p + "self_attn.indexer.", b + "indexer.")
            self.put_f32(b + "ffn_norm.weight", *self.hf(p + "post_attention_layernorm.weight"))

            if i < n_dense:
                for proj, short in (("gate_proj", "ffn_gate"), ("up_proj", "ffn_up"), ("down_proj", "ffn_down")):
                    self.put_matrix(f"{b}{short}.weight", *self.hf(f"{p}mlp.{proj}.weight"))
                continue

            self.put_f32(b + "ffn_gate_inp.weight", *self.hf(p + "mlp.gate.weight"))
            bias = p + "mlp.gate.e_score_correction_bias"
            if self.st.has(bias):
                self.put_f32(b + "exp_probs_b.bias", *self.hf(bias))
            for proj, short in (("gate_proj", "ffn_gate_exps"), ("up_proj", "ffn_up_exps"), ("down_proj", "ffn_down_exps")):
                parts = [self.hf(f"{p}mlp.experts.{e}.{proj}.weight") for e in range(n_expert)]
                dtypes = {d for d, _ in parts}
                if len(dtypes) != 1:
                    raise ValueError(f"layer {i}: mixed expert dtypes {dtypes}")
                stacked = np.stack([a for _, a in parts], axis=0)  # [n_expert, out, in]
                self.put_matrix(f"{b}{short}.weight", dtypes.pop(), stacked)
            if c.get("n_shared_experts"):
                for proj, short in (("gate_proj", "ffn_gate_shexp"), ("up_proj", "ffn_up_shexp"), ("down_proj", "ffn_down_shexp")):
                    self.put_matrix(f"{b}{short}.weight", *self.hf(f"{p}mlp.shared_experts.{proj}.weight"))

        self.put_f32("output_norm.weight", *self.hf("model.norm.weight"))
        if not c.get("tie_word_embeddings", False) and self.st.has("lm_head.weight"):
            self.put_matrix("output.weight", *self.hf("lm_head.weight"))

    def add_indexer(self, p: str, b: str) -> None:
        """DeepSeek-V3.2's lightning indexer of one layer, as llama.cpp's deepseek32 loads it."""
        self.put_matrix(b + "attn_q_b.weight", *self.hf(p + "wq_b.weight"))
        self.put_matrix(b + "attn_k.weight", *self.hf(p + "wk.weight"))
        self.put_f32(b + "k_norm.weight", *self.hf(p + "k_norm.weight"))
        self.put_f32(b + "k_norm.bias", *self.hf(p + "k_norm.bias"))
        self.put_matrix(b + "proj.weight", *self.hf(p + "weights_proj.weight"))

    # -- hyper-parameters -----------------------------------------------------------------

    def add_hparams(self) -> None:
        c = self.cfg
        w = self.writer
        w.add_name(self.name)
        w.add_file_type({"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                         "f32": gguf.LlamaFileType.ALL_F32}[self.outtype])
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)

        w.add_block_count(c["num_hidden_layers"])
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        w.add_feed_forward_length(c["intermediate_size"])
        w.add_head_count(c["num_attention_heads"])
        # llama.cpp runs MLA as MQA over the compressed latent (one kv head); ik_llama.cpp's
        # whole-kv_b layout keeps the model's head count.
        w.add_head_count_kv(c["num_attention_heads"] if self.whole_kv_b else 1)
        w.add_layer_norm_rms_eps(c.get("rms_norm_eps", 1e-6))
        w.add_rope_freq_base(c.get("rope_theta", 10000.0))
        w.add_rope_dimension_count(c["qk_rope_head_dim"])
        w.add_vocab_size(c["vocab_size"])

        has_moe = c.get("n_routed_experts") is not None
        n_dense = c.get("first_k_dense_replace")
        if n_dense is None:
            n_dense = 0 if has_moe else c["num_hidden_layers"]
        w.add_leading_dense_block_count(n_dense)

        if c.get("q_lora_rank"):
            w.add_q_lora_rank(c["q_lora_rank"])
        kv_lora = c["kv_lora_rank"]
        w.add_kv_lora_rank(kv_lora)
        if self.whole_kv_b:  # the per-head lengths, as before llama.cpp's MQA layout
            w.add_key_length(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            w.add_value_length(c["v_head_dim"])
        else:
            w.add_key_length(kv_lora + c["qk_rope_head_dim"])
            w.add_value_length(kv_lora)
            w.add_key_length_mla(c["qk_nope_head_dim"] + c["qk_rope_head_dim"])
            w.add_value_length_mla(c["v_head_dim"])

        if self.sparse:
            w.add_indexer_head_count(c["index_n_heads"])
            w.add_indexer_key_length(c["index_head_dim"])
            w.add_indexer_top_k(c["index_topk"])

        w.add_expert_feed_forward_length(c.get("moe_intermediate_size") or c["intermediate_size"])
        if has_moe:
            w.add_expert_count(c["n_routed_experts"])
            w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_expert_shared_count(c.get("n_shared_experts") or 0)
        if c.get("n_group") is not None:
            w.add_expert_group_count(c["n_group"])
        if c.get("topk_group") is not None:
            w.add_expert_group_used_count(c["topk_group"])
        if c.get("routed_scaling_factor") is not None:
            w.add_expert_weights_scale(c["routed_scaling_factor"])
        if c.get("norm_topk_prob"):
            w.add_expert_weights_norm(True)
        scoring = c.get("scoring_func", "softmax")
        gating = {"sigmoid": gguf.ExpertGatingFuncType.SIGMOID,
                  "softmax": gguf.ExpertGatingFuncType.SOFTMAX}.get(scoring)
        if gating is None:
            raise ValueError(f"unsupported scoring_func {scoring!r}")
        w.add_expert_gating_func(gating)

        rope = c.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type"))
        if rope_type == "yarn" and rope.get("factor") is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
            w.add_rope_scaling_factor(rope["factor"])
            w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
            if rope.get("beta_fast") is not None:
                w.add_rope_scaling_yarn_beta_fast(rope["beta_fast"])
            if rope.get("beta_slow") is not None:
                w.add_rope_scaling_yarn_beta_slow(rope["beta_slow"])
            if rope.get("mscale_all_dim") is not None:
                # llama.cpp's deepseek2 loader divides this key by 0.1 again
                w.add_rope_scaling_yarn_log_mul(0.1 * rope["mscale_all_dim"])
        elif rope_type == "linear" and rope.get("factor") is not None:
            w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
            w.add_rope_scaling_factor(rope["factor"])
        elif rope_type not in (None, "default"):
            raise ValueError(f"unsupported rope scaling {rope_type!r}")

    # -- vocabulary -----------------------------------------------------------------------

    def add_vocab(self) -> None:
        c = self.cfg
        w = self.writer
        if not (self.dir / "tokenizer.json").exists():
            # a random test model: llama.cpp runs it by token ids, with vocab_size (written with
            # the hyper-parameters) dummy tokens
            print(f"note: no tokenizer.json in {self.dir}; writing tokenizer model 'none'")
            w.add_tokenizer_model("none")
            return
        tok = json.loads((self.dir / "tokenizer.json").read_text())
        model = tok["model"]
        if model.get("type") != "BPE":
            raise ValueError(f"only BPE tokenizers are supported, got {model.get('type')!r}")
        n_vocab = c["vocab_size"]

        by_id: dict[int, tuple[str, int]] = {}
        for text, idx in model["vocab"].items():
            by_id[idx] = (text, gguf.TokenType.NORMAL)
        for added in tok.get("added_tokens", []):
            text = added["content"]
            looks_special = (text.startswith("<|") and text.endswith("|>")) or \
                            (text.startswith("<\uff5c") and text.endswith("\uff5c>"))
            kind = gguf.TokenType.CONTROL if (added.get("special") or looks_special) else gguf.TokenType.USER_DEFINED
            by_id[added["id"]] = (text, kind)
        if by_id and max(by_id) >= n_vocab:
            raise ValueError(f"tokenizer has id {max(by_id)} >= vocab_size {n_vocab}")

        tokens: list[str] = []
        types: list[int] = []
        for i in range(n_vocab):
            text, kind = by_id.get(i, (f"[PAD{i}]", gguf.TokenType.UNUSED))
            tokens.append(text)
            types.append(int(kind))

        merges = []
        for m in model.get("merges", []):
            merges.append(m if isinstance(m, str) else " ".join(m))

        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre(self.pre)
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(merges)

        text_to_id = {t: i for i, t in enumerate(tokens)}
        tcfg_path = self.dir / "tokenizer_config.json"
        tcfg = json.loads(tcfg_path.read_text()) if tcfg_path.exists() else {}

        def token_id(key: str) -> int | None:
            v = tcfg.get(key)
            if isinstance(v, dict):
                v = v.get("content")
            if isinstance(v, str):
                return text_to_id.get(v)
            return None

        bos = token_id("bos_token")
        eos = token_id("eos_token")
        pad = token_id("pad_token")
        bos = c.get("bos_token_id") if bos is None else bos
        eos = c.get("eos_token_id") if eos is None else eos
        if bos is not None:
            w.add_bos_token_id(bos)
        if eos is not None:
            w.add_eos_token_id(eos)
        if pad is not None:
            w.add_pad_token_id(pad)
        if "add_bos_token" in tcfg:
            w.add_add_bos_token(bool(tcfg["add_bos_token"]))
        if "add_eos_token" in tcfg:
            w.add_add_eos_token(bool(tcfg["add_eos_token"]))
        if isinstance(tcfg.get("chat_template"), str):
            w.add_chat_template(tcfg["chat_template"])

    def run(self, out_path: Path) -> None:
        self.add_hparams()
        self.add_vocab()
        self.add_tensors()
        left = self.st.unused(self.skipped_source)
        if left:
            raise ValueError(f"{len(left)} tensors were not converted, e.g. {left[:5]}")
        self.writer.write_header_to_file()
        self.writer.write_kv_data_to_file()
        self.writer.write_tensors_to_file()
        self.writer.close()
        print(f"wrote {out_path}: {self.summary()}")

    def summary(self) -> str:
        return f"{self.n_matrices} {self.outtype.upper()} + {self.n_f32} F32 tensors"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("model_dir", type=Path, help="HF model dir (config.json, *.safetensors, tokenizer.json)")
    ap.add_argument("out", type=Path, help="output .gguf path")
    ap.add_argument("--pre", default="deepseek-v3", help="tokenizer.ggml.pre value (default deepseek-v3)")
    ap.add_argument("--name", default=None, help="general.name (default: the model dir's name)")
    ap.add_argument("--outtype", choices=["bf16", "q8_0", "f32"], default="bf16",
                    help="type of the weight matrices (default bf16; V4 q8_0 keeps FP4 experts as MXFP4)")
    ap.add_argument("--whole-kv-b", action="store_true",
                    help="ik_llama.cpp's layout: attn_kv_b whole and head_count_kv = heads, "
                         "instead of llama.cpp's attn_k_b / attn_v_b split and one kv head")
    args = ap.parse_args()
    converter = Converter
    if is_v4_dir(args.model_dir):
        if args.whole_kv_b:
            sys.exit("--whole-kv-b is for MLA models; DeepSeek-V4 has no kv_b")
        from hf_to_gguf_v4 import V4Converter  # imports this module: load it only when needed
        converter = V4Converter
    converter(args.model_dir, args.out, args.pre, args.name, args.outtype,
              args.whole_kv_b).run(args.out)


def is_v4_dir(model_dir: Path) -> bool:
    cfg = json.loads((model_dir / "config.json").read_text())
    return cfg.get("model_type") == "deepseek_v4" or "DeepseekV4ForCausalLM" in cfg.get("architectures", [])


if __name__ == "__main__":
    main()
