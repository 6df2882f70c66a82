"""The DeepSeek-V4 part of hf_to_gguf.py: a V4 directory in DeepSeek's released layout -> a GGUF
for llama.cpp's `deepseek4` architecture (its src/models/deepseek4.cpp).

The released layout names tensors without `model.` (`embed.weight`, `layers.N.attn.wq_a.weight`,
`layers.N.ffn.experts.E.w1.weight`, `hc_head_fn`, ...). Attention and shared-expert matrices are
FP8 E4M3 with an E8M0 `.scale` per 128x128 block; routed experts are FP4 E2M1 stored as I8, two
codes a byte (the even column in the low nibble), with an E8M0 `.scale` per 32 values; the hash
layers route by an I64 `ffn.gate.tid2eid`; the rest is BF16 or F32. A directory written by
`mlaserve make-model --dtype bf16` has the same names with BF16 matrices and experts.

Every quantized matrix is dequantized exactly (an E4M3 or E2M1 value times a power of two has at
most 4 significant bits, so it fits BF16), then written by --outtype:
  f32   every tensor F32: ggml then computes in F32 throughout (a BF16 weight makes ggml round the
        activations to BF16 too), for comparing logits with our float64 reference;
  bf16  matrices BF16, losslessly for these sources (the default);
  q8_0  matrices Q8_0, and FP4 experts repacked to ggml's MXFP4, which holds the same E2M1 codes
        and E8M0 scales (lossless; llama.cpp's own converter writes V4 experts so).
Tensors stored as F32 (hyper-connection mixers, sinks, compressor `ape`, routing bias), norms and
the router stay F32 whatever the outtype; `tid2eid` becomes I32.

The names and metadata keys are those llama.cpp's loader reads (`load_arch_hparams`,
`load_arch_tensors` in src/models/deepseek4.cpp); this needs the gguf-py of a llama.cpp that has
`deepseek4`. MTP layers (`mtp.*`) are skipped. Without tokenizer.json (our random test models),
the vocabulary is written as tokenizer model "none" with vocab_size dummy tokens, which llama.cpp
accepts for running by token ids.

    PYTHONPATH=/tmp/llama.cpp/gguf-py /usr/bin/python3 bench/hf_to_gguf.py V4_DIR OUT.gguf --outtype f32

llama.cpp's deepseek4 runs only some shapes (checked against its source of Sept. 2026): hc_mult 4,
compress ratios 0 / 4 / 128, and index_head_dim a multiple of 64 (the indexer's Hadamard rotation is
at least 64 wide; tests/data/configs/v4-tiny.json's 32 aborts in ggml_reshape_2d). The converter
warns about such a config but writes it.
"""
import re

import numpy as np

import gguf

import hf_to_gguf as base

T = gguf.MODEL_TENSOR


# ---------------------------------------------------------------------------------------------
# exact dequantization of DeepSeek's FP8 / FP4 formats


def _e4m3fn_table() -> np.ndarray:
    """float32 value of each FP8 E4M3 "fn" byte: bias 7, subnormals at exponent 0, no infinities;
    S.1111.111 is NaN (it never occurs in a checkpoint, and is rejected by the caller)."""
    b = np.arange(256)
    sign = np.where(b & 0x80, -1.0, 1.0)
    exp = (b >> 3) & 0xF
    man = b & 0x7
    mag = np.where(exp == 0, man / 8.0 * 2.0 ** -6, (1.0 + man / 8.0) * 2.0 ** (exp - 7.0))
    mag = np.where((exp == 15) & (man == 7), np.nan, mag)
    return (sign * mag).astype(np.float32)


def _e2m1_table() -> np.ndarray:
    """float32 value of each 4-bit E2M1 code: bits s e e m, magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6}."""
    mag = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0], dtype=np.float32)
    return np.concatenate([mag, -mag])


E4M3FN = _e4m3fn_table()
E2M1 = _e2m1_table()


def e8m0_to_f32(raw: np.ndarray) -> np.ndarray:
    """E8M0 bytes -> 2^(byte - 127). Byte 255 is NaN in the format; a checkpoint never has it."""
    e = np.asarray(raw, dtype=np.uint8)
    if np.any(e == 255):
        raise ValueError("E8M0 scale byte 255 (NaN)")
    return np.ldexp(np.float32(1.0), e.astype(np.int32) - 127).astype(np.float32)


def dequant_fp8(codes: np.ndarray, scale: np.ndarray, block: tuple[int, int]) -> np.ndarray:
    """E4M3 codes [rows, cols] with one E8M0 scale per block (the last blocks may be partial)."""
    rows, cols = codes.shape
    b0, b1 = block
    if scale.shape != (-(-rows // b0), -(-cols // b1)):
        raise ValueError(f"FP8 scale grid {scale.shape} does not fit {codes.shape} in {b0}x{b1} blocks")
    w = E4M3FN[np.asarray(codes, dtype=np.uint8)]
    if np.isnan(w).any():
        raise ValueError("FP8 weight holds a NaN code")
    s = np.repeat(np.repeat(e8m0_to_f32(scale), b0, axis=0), b1, axis=1)[:rows, :cols]
    return w * s


def unpack_fp4_codes(packed: np.ndarray) -> np.ndarray:
    """I8 [rows, cols/2] -> 4-bit codes uint8 [rows, cols]; the low nibble is the even column."""
    p = np.asarray(packed).view(np.uint8)
    codes = np.empty((p.shape[0], 2 * p.shape[1]), dtype=np.uint8)
    codes[:, 0::2] = p & 0xF
    codes[:, 1::2] = p >> 4
    return codes


def dequant_fp4(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """FP4 codes with one E8M0 scale per group of columns (32 in DeepSeek's checkpoints)."""
    codes = unpack_fp4_codes(packed)
    rows, cols = codes.shape
    if scale.shape[0] != rows or cols % scale.shape[1]:
        raise ValueError(f"FP4 scale {scale.shape} does not fit {codes.shape}")
    return E2M1[codes] * np.repeat(e8m0_to_f32(scale), cols // scale.shape[1], axis=1)


def fp4_to_mxfp4(packed: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """FP4 codes + E8M0 scales per 32 columns -> ggml MXFP4 blocks, bytes [rows, cols/32 * 17].

    A ggml MXFP4 block is the E8M0 byte, then 16 bytes whose low nibbles are values 0..15 and high
    nibbles values 16..31; its code table is E2M1 doubled and its scale halved, so the codes and
    scale bytes carry over unchanged and only the nibble order differs from DeepSeek's."""
    codes = unpack_fp4_codes(packed)
    rows, cols = codes.shape
    if cols % 32 or scale.shape != (rows, cols // 32):
        raise ValueError(f"MXFP4 needs one scale per 32 columns: codes {codes.shape}, scale {scale.shape}")
    blocks = codes.reshape(rows, cols // 32, 2, 16)
    qs = blocks[:, :, 0, :] | (blocks[:, :, 1, :] << 4)
    e = np.asarray(scale, dtype=np.uint8).reshape(rows, cols // 32, 1)
    return np.concatenate([e, qs], axis=2).reshape(rows, cols // 32 * 17)


# ---------------------------------------------------------------------------------------------
# names: DeepSeek's -> llama.cpp's, and how each tensor is stored

# how a tensor is written: MATRIX follows --outtype, F32 stays F32 whatever it
MATRIX, F32 = "matrix", "f32"

_ROOT = {
    "embed.weight": (T.TOKEN_EMBD, ".weight", MATRIX),
    "head.weight": (T.OUTPUT, ".weight", MATRIX),
    "norm.weight": (T.OUTPUT_NORM, ".weight", F32),
    "hc_head_fn": (T.HC_HEAD_FN, ".weight", F32),
    "hc_head_base": (T.HC_HEAD_BASE, ".weight", F32),
    "hc_head_scale": (T.HC_HEAD_SCALE, ".weight", F32),
}

# per layer, after `layers.N.`; routed experts and tid2eid are handled apart (stacked / integer)
_LAYER = {
    "attn_norm.weight": (T.ATTN_NORM, ".weight", F32),
    "ffn_norm.weight": (T.FFN_NORM, ".weight", F32),
    "hc_attn_fn": (T.HC_ATTN_FN, ".weight", F32),
    "hc_attn_base": (T.HC_ATTN_BASE, ".weight", F32),
    "hc_attn_scale": (T.HC_ATTN_SCALE, ".weight", F32),
    "hc_ffn_fn": (T.HC_FFN_FN, ".weight", F32),
    "hc_ffn_base": (T.HC_FFN_BASE, ".weight", F32),
    "hc_ffn_scale": (T.HC_FFN_SCALE, ".weight", F32),
    "attn.attn_sink": (T.ATTN_SINKS, ".weight", F32),
    "attn.wq_a.weight": (T.ATTN_Q_A, ".weight", MATRIX),
    "attn.q_norm.weight": (T.ATTN_Q_A_NORM, ".weight", F32),
    "attn.wq_b.weight": (T.ATTN_Q_B, ".weight", MATRIX),
    "attn.wkv.weight": (T.ATTN_KV, ".weight", MATRIX),
    "attn.kv_norm.weight": (T.ATTN_KV_NORM, ".weight", F32),
    # wo_a stays [o_groups * o_lora_rank, heads * head_dim / o_groups]; the loader views it per group
    "attn.wo_a.weight": (T.ATTN_OUT_A, ".weight", MATRIX),
    "attn.wo_b.weight": (T.ATTN_OUT_B, ".weight", MATRIX),
    "attn.compressor.ape": (T.ATTN_COMPRESSOR_APE, ".weight", F32),
    "attn.compressor.wkv.weight": (T.ATTN_COMPRESSOR_WKV, ".weight", MATRIX),
    "attn.compressor.wgate.weight": (T.ATTN_COMPRESSOR_WGATE, ".weight", MATRIX),
    "attn.compressor.norm.weight": (T.ATTN_COMPRESSOR_NORM, ".weight", F32),
    "attn.indexer.wq_b.weight": (T.INDEXER_ATTN_Q_B, ".weight", MATRIX),
    "attn.indexer.weights_proj.weight": (T.INDEXER_PROJ, ".weight", MATRIX),
    "attn.indexer.compressor.ape": (T.INDEXER_COMPRESSOR_APE, ".weight", F32),
    "attn.indexer.compressor.wkv.weight": (T.INDEXER_COMPRESSOR_WKV, ".weight", MATRIX),
    "attn.indexer.compressor.wgate.weight": (T.INDEXER_COMPRESSOR_WGATE, ".weight", MATRIX),
    "attn.indexer.compressor.norm.weight": (T.INDEXER_COMPRESSOR_NORM, ".weight", F32),
    # the router stays F32 as in the V2/V3 conversion: its top-k picks the experts
    "ffn.gate.weight": (T.FFN_GATE_INP, ".weight", F32),
    "ffn.gate.bias": (T.FFN_EXP_PROBS_B, ".bias", F32),
    "ffn.shared_experts.w1.weight": (T.FFN_GATE_SHEXP, ".weight", MATRIX),
    "ffn.shared_experts.w2.weight": (T.FFN_DOWN_SHEXP, ".weight", MATRIX),
    "ffn.shared_experts.w3.weight": (T.FFN_UP_SHEXP, ".weight", MATRIX),
}

# routed experts: DeepSeek's w1 (gate), w2 (down), w3 (up), stacked to [n_expert, out, in]
_EXPERTS = (("w1", T.FFN_GATE_EXP), ("w2", T.FFN_DOWN_EXP), ("w3", T.FFN_UP_EXP))


def gguf_name(key: gguf.MODEL_TENSOR, suffix: str, layer: int | None = None) -> str:
    name = gguf.TENSOR_NAMES[key]
    return (name.format(bid=layer) if layer is not None else name) + suffix


# ---------------------------------------------------------------------------------------------
# conversion


class V4Converter(base.Converter):
    ARCH = gguf.MODEL_ARCH.DEEPSEEK4
    # stacked V4 experts are GiBs each: spool every tensor to a temporary file as it is converted
    # instead of holding all of them until the GGUF is written
    USE_TEMP_FILE = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        qc = self.cfg.get("quantization_config") or {}
        self.block = tuple(qc.get("weight_block_size", (128, 128)))
        self.counts: dict[str, int] = {}  # tensors written, by GGML type

    def summary(self) -> str:
        return " + ".join(f"{n} {t}" for t, n in sorted(self.counts.items())) + " tensors"

    def add(self, name: str, data: np.ndarray, qtype: gguf.GGMLQuantizationType) -> None:
        if qtype in (gguf.GGMLQuantizationType.F32, gguf.GGMLQuantizationType.I32):
            self.writer.add_tensor(name, data)
        else:  # raw bytes / bits, which gguf-py takes with their own shape
            self.writer.add_tensor(name, data, raw_shape=data.shape, raw_dtype=qtype)
        self.counts[qtype.name] = self.counts.get(qtype.name, 0) + 1

    def skipped_source(self, name: str) -> bool:
        return name.startswith("mtp.")  # the MTP layers are not converted

    # -- reading: every source tensor as float32, whatever its storage -----------------------

    def weight(self, name: str) -> np.ndarray:
        dtype, arr = self.hf(name)
        scale = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
        if dtype == "F8_E4M3":
            return dequant_fp8(arr, self.hf(scale)[1], self.block)
        if dtype == "I8":
            return dequant_fp4(arr, self.hf(scale)[1])
        if dtype == "F8_E8M0":
            raise ValueError(f"{name}: a scale read as a weight")
        return base.to_f32(dtype, arr)

    # -- writing ---------------------------------------------------------------------------

    def encode(self, kind: str, w: np.ndarray) -> tuple[np.ndarray, gguf.GGMLQuantizationType]:
        """float32 values -> the data and type they are written as."""
        Q = gguf.GGMLQuantizationType
        w = np.ascontiguousarray(w, dtype=np.float32)
        outtype = self.outtype if kind == MATRIX and w.ndim >= 2 else "f32"
        if outtype == "q8_0" and w.shape[-1] % 32:
            outtype = "bf16"  # Q8_0 blocks are 32 values of a row
        if outtype == "q8_0":
            return gguf.quants.quantize(w, Q.Q8_0), Q.Q8_0
        if outtype == "bf16":
            return np.ascontiguousarray(base.to_bf16_bits("F32", w)), Q.BF16
        return w, Q.F32

    def put(self, gguf_tensor: str, kind: str, w: np.ndarray) -> None:
        self.add(gguf_tensor, *self.encode(kind, w))

    def put_experts(self, layer: int, proj: str, key: gguf.MODEL_TENSOR) -> None:
        n_expert = self.cfg["n_routed_experts"]
        names = [f"layers.{layer}.ffn.experts.{e}.{proj}.weight" for e in range(n_expert)]
        out = gguf_name(key, ".weight", layer)
        missing = [n for n in names if not self.st.has(n)]
        if missing:
            raise KeyError(f"layer {layer}: {len(missing)} routed experts lack {proj}, e.g. {missing[0]}")
        if {self.st.tensors[n][0] for n in names} == {"I8"} and self.outtype == "q8_0":
            # lossless: MXFP4 holds DeepSeek's E2M1 codes and E8M0 scales as they are
            blocks = np.stack([fp4_to_mxfp4(self.hf(n)[1], self.hf(n[: -len(".weight")] + ".scale")[1])
                               for n in names], axis=0)
            self.add(out, blocks, gguf.GGMLQuantizationType.MXFP4)
            return
        # encode expert by expert: a stacked full-size V4 expert tensor is GiBs in float32
        parts = [self.encode(MATRIX, self.weight(n)) for n in names]
        self.add(out, np.stack([d for d, _ in parts], axis=0), parts[0][1])

    def put_tid2eid(self, layer: int) -> None:
        # llama.cpp gathers rows of it by token id with ggml_get_rows, which takes I32
        _, table = self.hf(f"layers.{layer}.ffn.gate.tid2eid")
        n_expert = self.cfg["n_routed_experts"]
        if table.min() < 0 or table.max() >= n_expert:
            raise ValueError(f"layer {layer}: tid2eid holds an expert id outside [0, {n_expert})")
        self.add(gguf_name(T.FFN_GATE_TID2EID, ".weight", layer),
                 np.ascontiguousarray(table, dtype=np.int32), gguf.GGMLQuantizationType.I32)

    def add_tensors(self) -> None:
        c = self.cfg
        n_layer = c["num_hidden_layers"]
        n_hash = c.get("num_hash_layers", 0)
        for name, (key, suffix, kind) in _ROOT.items():
            self.put(gguf_name(key, suffix), kind, self.weight(name))
        for name in sorted(self.st.tensors):
            m = re.match(r"layers\.(\d+)\.(.+)$", name)
            if not m or name.endswith(".scale") or ".ffn.experts." in name or name.endswith(".tid2eid"):
                continue
            layer, rest = int(m.group(1)), m.group(2)
            if layer >= n_layer:
                raise ValueError(f"{name}: layer {layer} >= num_hidden_layers {n_layer}")
            if rest == "ffn.gate.bias" and layer < n_hash:
                self.hf(name)  # hash layers route by tid2eid; llama.cpp has no bias tensor there
                continue
            if rest not in _LAYER:
                raise ValueError(f"{name}: no llama.cpp deepseek4 tensor for it")
            key, suffix, kind = _LAYER[rest]
            self.put(gguf_name(key, suffix, layer), kind, self.weight(name))
        for layer in range(n_layer):
            for proj, key in _EXPERTS:
                self.put_experts(layer, proj, key)
            if layer < n_hash:
                self.put_tid2eid(layer)

    # -- hyper-parameters -----------------------------------------------------------------

    def warn_llama_limits(self) -> None:
        c = self.cfg
        problems = []
        if c["hc_mult"] != 4:
            problems.append(f"hc_mult {c['hc_mult']} (llama.cpp asserts 4)")
        if set(c["compress_ratios"]) - {0, 4, 128}:
            problems.append(f"compress_ratios {sorted(set(c['compress_ratios']))} (llama.cpp takes 0, 4, 128)")
        if 4 in c["compress_ratios"] and c["index_head_dim"] % 64:
            problems.append(f"index_head_dim {c['index_head_dim']} (llama.cpp needs a multiple of 64)")
        for p in problems:
            print(f"warning: llama.cpp's deepseek4 cannot run this model: {p}")

    def add_hparams(self) -> None:
        c = self.cfg
        w = self.writer
        n_layer = c["num_hidden_layers"]
        self.warn_llama_limits()
        w.add_name(self.name)
        w.add_file_type({"q8_0": gguf.LlamaFileType.MOSTLY_Q8_0, "bf16": gguf.LlamaFileType.MOSTLY_BF16,
                         "f32": gguf.LlamaFileType.ALL_F32}[self.outtype])
        w.add_quantization_version(gguf.GGML_QUANT_VERSION)

        w.add_block_count(n_layer)
        w.add_context_length(c["max_position_embeddings"])
        w.add_embedding_length(c["hidden_size"])
        # the hyper-connection streams leave the trunk flattened, hc_mult * hidden wide
        w.add_embedding_length_out(c["hidden_size"] * c["hc_mult"])
        w.add_head_count(c["num_attention_heads"])
        w.add_head_count_kv(c.get("num_key_value_heads", 1))
        w.add_key_length(c["head_dim"])
        w.add_value_length(c["head_dim"])
        w.add_rope_dimension_count(c["qk_rope_head_dim"])
        w.add_layer_norm_rms_eps(c.get("rms_norm_eps", 1e-6))
        w.add_vocab_size(c["vocab_size"])
        w.add_q_lora_rank(c["q_lora_rank"])
        w.add_sliding_window(c["sliding_window"])
        w.add_attention_output_group_count(c["o_groups"])
        w.add_attention_output_lora_rank(c["o_lora_rank"])
        ratios = list(c["compress_ratios"])
        if len(ratios) < n_layer:
            raise ValueError(f"compress_ratios has {len(ratios)} entries for {n_layer} layers")
        w.add_attention_compress_ratios(ratios)
        w.add_indexer_head_count(c["index_n_heads"])
        w.add_indexer_key_length(c["index_head_dim"])
        w.add_indexer_top_k(c["index_topk"])
        w.add_hyper_connection_count(c["hc_mult"])
        w.add_hyper_connection_sinkhorn_iterations(c["hc_sinkhorn_iters"])
        w.add_hyper_connection_epsilon(c["hc_eps"])
        self.add_rope()
        self.add_moe()

    def add_rope(self) -> None:
        c = self.cfg
        w = self.writer
        w.add_rope_freq_base(c.get("rope_theta", 10000.0))
        w.add_attention_compress_rope_freq_base(c["compress_rope_theta"])
        rope = c.get("rope_scaling") or {}
        rope_type = rope.get("rope_type", rope.get("type"))
        if rope_type in (None, "default"):
            return
        if rope_type != "yarn":
            raise ValueError(f"unsupported rope scaling {rope_type!r} for DeepSeek-V4")
        # llama.cpp applies YaRN to the compressing layers only, as DeepSeek does; it takes no
        # magnitude scale from here (V4 has none) and reads beta_fast / beta_slow from its own
        # defaults (32 / 1), which the keys below do not change
        w.add_rope_scaling_type(gguf.RopeScalingType.YARN)
        w.add_rope_scaling_factor(rope["factor"])
        w.add_rope_scaling_orig_ctx_len(rope["original_max_position_embeddings"])
        for key, add in (("beta_fast", w.add_rope_scaling_yarn_beta_fast),
                         ("beta_slow", w.add_rope_scaling_yarn_beta_slow)):
            if rope.get(key) is not None:
                add(rope[key])
        if (rope.get("beta_fast", 32), rope.get("beta_slow", 1)) != (32, 1):
            print(f"warning: llama.cpp's deepseek4 ignores YaRN beta_fast/beta_slow "
                  f"{rope.get('beta_fast')}/{rope.get('beta_slow')} and uses 32/1")

    def add_moe(self) -> None:
        c = self.cfg
        w = self.writer
        n_layer = c["num_hidden_layers"]
        scoring = c.get("scoring_func", "sqrtsoftplus")
        if scoring != "sqrtsoftplus":
            raise ValueError(f"llama.cpp's deepseek4 supports scoring_func sqrtsoftplus only, not {scoring!r}")
        w.add_expert_gating_func(gguf.ExpertGatingFuncType.SQRTSOFTPLUS)
        w.add_expert_count(c["n_routed_experts"])
        w.add_expert_used_count(c["num_experts_per_tok"])
        w.add_expert_shared_count(c.get("n_shared_experts", 1))
        w.add_expert_feed_forward_length(c["moe_intermediate_size"])
        w.add_expert_weights_scale(c.get("routed_scaling_factor", 1.0))
        # DeepSeek's V4 gate divides the chosen non-softmax scores by their sum whatever
        # norm_topk_prob says; llama.cpp normalises only when this key is true
        w.add_expert_weights_norm(True)
        w.add_hash_layer_count(c.get("num_hash_layers", 0))
        # both the routed and the shared experts clamp; the loader requires the key, 0 = no clamp
        limit = float(c.get("swiglu_limit") or 0.0)
        w.add_swiglu_clamp_exp([limit] * n_layer)
        w.add_swiglu_clamp_shexp([limit] * n_layer)
