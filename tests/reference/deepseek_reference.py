#!/usr/bin/env python3
"""Float64 numpy reference forward of DeepSeek-V2 / V3 / V3.2 models from a HuggingFace directory.

Written from the rules of DeepSeek's own inference code (DeepSeek-V3 and DeepSeek-V3.2-Exp
`inference/model.py`, the latter after its 2025-11-17 fix of the indexer's RoPE layout) and HF's
config keys. Everything is computed in float64 from the stored weights (BF16 / F16 / F32, or FP8 E4M3
dequantized exactly with its 128x128 block scales). No torch; numpy only.

    python3 tests/reference/deepseek_reference.py --model DIR --input IN.json --output OUT.json \
        [--max-new-tokens N]

IN.json:  {"prompts": [{"ids": [...]}, ...]}
OUT.json: {"prompts": [{"ids", "last_logits", "greedy", "greedy_logits", ...}]} (see README.md).

Greedy decoding recomputes the whole sequence at every step (the models are tiny), takes argmax with
ties to the lower id and ignores EOS.
"""

import argparse
import json
import math
import os
import struct
import sys
import time

try:
    import numpy as np
except ImportError:                 # e.g. a pyenv python3 ahead of Debian's, which has python3-numpy
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise


# ----------------------------------------------------------------------------------------------
# safetensors
# ----------------------------------------------------------------------------------------------

def _e4m3fn_table():
    """float64 value of each of the 256 FP8 E4M3 "fn" bytes: bias 7, no infinities, S.1111.111 is NaN."""
    table = np.empty(256, dtype=np.float64)
    for b in range(256):
        sign = -1.0 if b & 0x80 else 1.0
        exp = (b >> 3) & 0xF
        man = b & 0x7
        if exp == 0xF and man == 0x7:
            table[b] = np.nan
        elif exp == 0:
            table[b] = sign * (man / 8.0) * 2.0 ** -6          # subnormal
        else:
            table[b] = sign * (1.0 + man / 8.0) * 2.0 ** (exp - 7)
    return table


E4M3FN = _e4m3fn_table()


def _decode(dtype, raw, shape):
    """Raw little-endian bytes of one tensor -> float64 ndarray of `shape`."""
    if dtype == "BF16":
        u16 = np.frombuffer(raw, dtype="<u2")
        a = (u16.astype(np.uint32) << 16).view(np.float32)
    elif dtype == "F16":
        a = np.frombuffer(raw, dtype="<f2")
    elif dtype == "F32":
        a = np.frombuffer(raw, dtype="<f4")
    elif dtype == "F64":
        a = np.frombuffer(raw, dtype="<f8")
    elif dtype == "F8_E4M3":
        a = E4M3FN[np.frombuffer(raw, dtype=np.uint8)]
    elif dtype in ("I64", "I32", "I16", "I8", "U8"):
        a = np.frombuffer(raw, dtype={"I64": "<i8", "I32": "<i4", "I16": "<i2",
                                      "I8": "i1", "U8": "u1"}[dtype])
    else:
        raise ValueError(f"unsupported safetensors dtype {dtype}")
    return a.astype(np.float64).reshape(shape)


class SafeTensors:
    """Reads the tensors of a model directory: one model.safetensors, or the shards named by
    model.safetensors.index.json (symlinked files are followed). Tensors are decoded on request."""

    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            quant = json.load(f).get("quantization_config") or {}
        groups = quant.get("config_groups") or {}
        # compressed-tensors' group size (one config group of int4 weights), else 0
        self.int4_group = next(iter(groups.values()))["weights"]["group_size"] if groups else 0
        index = os.path.join(model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index) as f:
                files = sorted(set(json.load(f)["weight_map"].values()))
        else:
            files = [f for f in sorted(os.listdir(model_dir)) if f.endswith(".safetensors")]
        if not files:
            raise FileNotFoundError(f"no safetensors files in {model_dir}")
        self.entries = {}        # name -> (path, dtype, shape, begin, end)  (absolute file offsets)
        for fname in files:
            path = os.path.realpath(os.path.join(model_dir, fname))
            with open(path, "rb") as f:
                (hlen,) = struct.unpack("<Q", f.read(8))
                header = json.loads(f.read(hlen))
            for name, e in header.items():
                if name == "__metadata__":
                    continue
                b, en = e["data_offsets"]
                self.entries[name] = (path, e["dtype"], tuple(e["shape"]), 8 + hlen + b, 8 + hlen + en)
        self.dtypes = {n: e[1] for n, e in self.entries.items()}

    def __contains__(self, name):
        return name in self.entries or self._packed(name) in self.entries

    @staticmethod
    def _packed(name):
        return name[: -len(".weight")] + ".weight_packed" if name.endswith(".weight") else None

    def raw(self, name):
        path, dtype, shape, b, e = self.entries[name]
        with open(path, "rb") as f:
            f.seek(b)
            data = f.read(e - b)
        return _decode(dtype, data, shape)

    def get(self, name):
        """float64 tensor; an FP8 weight is multiplied by its `<name>_scale_inv` block scales; a
        compressed-tensors pack-quantized int4 module (`<module>.weight_packed` instead of
        `<module>.weight`) is unpacked and multiplied by its group scales."""
        if name not in self.entries and self._packed(name) in self.entries:
            return self._int4(name[: -len(".weight")])
        w = self.raw(name)
        if self.dtypes[name].startswith("F8_"):
            scale = self.raw(name + "_scale_inv")           # [ceil(out/B0), ceil(in/B1)]
            b0 = -(-w.shape[0] // scale.shape[0])
            b1 = -(-w.shape[1] // scale.shape[1])
            # the block size is 128x128 in every DeepSeek checkpoint; derive it from the shapes
            # only when the scale grid would not fit 128.
            if -(-w.shape[0] // 128) == scale.shape[0]:
                b0 = 128
            if -(-w.shape[1] // 128) == scale.shape[1]:
                b1 = 128
            full = np.repeat(np.repeat(scale, b0, axis=0), b1, axis=1)[: w.shape[0], : w.shape[1]]
            w = w * full
        return w


    def _int4(self, module):
        # int32 [rows, cols / 8]: value i of an int32 in bits 4i..4i+3, stored as q + 8
        packed = self.raw(module + ".weight_packed").astype(np.int64) & 0xFFFFFFFF
        rows, cols = (int(v) for v in self.raw(module + ".weight_shape"))
        shifts = 4 * np.arange(8)
        q = ((packed[:, :, None] >> shifts) & 0xF).reshape(rows, -1)[:, :cols] - 8
        scale = self.raw(module + ".weight_scale")     # [rows, ceil(cols / group)]
        group = -(-cols // scale.shape[1])
        if self.int4_group:
            group = self.int4_group
        return q * np.repeat(scale, group, axis=1)[:, :cols]


# ----------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------

class Config:
    def __init__(self, cfg):
        self.raw = cfg
        self.model_type = cfg.get("model_type", "deepseek_v3")
        self.hidden = cfg["hidden_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.n_heads = cfg["num_attention_heads"]
        self.vocab = cfg["vocab_size"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.q_lora_rank = cfg.get("q_lora_rank") or 0
        self.kv_lora_rank = cfg["kv_lora_rank"]
        self.d_nope = cfg["qk_nope_head_dim"]
        self.d_rope = cfg["qk_rope_head_dim"]
        self.d_v = cfg["v_head_dim"]
        self.d_qk = self.d_nope + self.d_rope
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        self.rope_scaling = cfg.get("rope_scaling") or None
        self.intermediate = cfg["intermediate_size"]
        self.moe_inter = cfg.get("moe_intermediate_size")
        self.n_routed = cfg.get("n_routed_experts") or 0
        self.n_shared = cfg.get("n_shared_experts") or 0
        self.top_k = cfg.get("num_experts_per_tok") or 0
        self.first_k_dense = cfg.get("first_k_dense_replace", 0)
        self.moe_freq = cfg.get("moe_layer_freq", 1)
        self.n_group = cfg.get("n_group") or 1
        self.topk_group = cfg.get("topk_group") or 1
        self.topk_method = cfg.get("topk_method", "greedy")
        self.scoring = cfg.get("scoring_func", "softmax")
        self.norm_topk_prob = bool(cfg.get("norm_topk_prob", False))
        self.routed_scale = cfg.get("routed_scaling_factor", 1.0)
        self.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))
        # DeepSeek-V3.2 lightning indexer
        self.has_indexer = "index_topk" in cfg
        self.index_heads = cfg.get("index_n_heads")
        self.index_dim = cfg.get("index_head_dim")
        self.index_topk = cfg.get("index_topk")

    def is_moe_layer(self, i):
        return self.n_routed > 0 and i >= self.first_k_dense and i % self.moe_freq == 0


# ----------------------------------------------------------------------------------------------
# RoPE (DeepSeek's YaRN frequencies; interleaved pairs for MLA, half-split pairs for the indexer)
# ----------------------------------------------------------------------------------------------

def yarn_mscale(scale, mscale):
    return 1.0 if scale <= 1 else 0.1 * mscale * math.log(scale) + 1.0


def rope_inv_freq(cfg):
    """Per-pair inverse frequencies [d_rope/2], with DeepSeek's YaRN correction when configured."""
    d, base = cfg.d_rope, cfg.rope_theta
    inv = 1.0 / base ** (np.arange(0, d, 2, dtype=np.float64) / d)
    rs = cfg.rope_scaling
    if rs and rs.get("type", rs.get("rope_type")) == "yarn":
        factor = rs["factor"]
        orig = rs["original_max_position_embeddings"]
        beta_fast, beta_slow = rs.get("beta_fast", 32), rs.get("beta_slow", 1)

        def corr_dim(rot):            # pair index whose wavelength does `rot` turns over `orig`
            return d * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))

        low = max(math.floor(corr_dim(beta_fast)), 0)
        high = min(math.ceil(corr_dim(beta_slow)), d - 1)
        if low == high:
            high += 0.001
        ramp = np.clip((np.arange(d // 2, dtype=np.float64) - low) / (high - low), 0.0, 1.0)
        # ramp 0 -> extrapolate (original freq), ramp 1 -> interpolate (freq / factor)
        inv = (inv / factor) * ramp + inv * (1.0 - ramp)
    return inv


def rope_cos_sin(cfg, T):
    """cos, sin [T, d_rope/2] for positions 0..T-1. HF multiplies both by
    mscale(factor, mscale) / mscale(factor, mscale_all_dim) (1 in DeepSeek's released configs)."""
    ang = np.arange(T, dtype=np.float64)[:, None] * rope_inv_freq(cfg)[None, :]
    att = 1.0
    rs = cfg.rope_scaling
    if rs and rs.get("type", rs.get("rope_type")) == "yarn":
        att = yarn_mscale(rs["factor"], rs.get("mscale", 1)) / yarn_mscale(rs["factor"], rs.get("mscale_all_dim", 0))
    return np.cos(ang) * att, np.sin(ang) * att


def rope_interleaved(x, cos, sin):
    """x [T, ..., d]: rotate pairs (x[2i], x[2i+1]) by angle pos*inv_freq[i]. cos/sin [T, d/2]."""
    shp = (x.shape[0],) + (1,) * (x.ndim - 2) + (cos.shape[1],)
    c, s = cos.reshape(shp), sin.reshape(shp)
    x0, x1 = x[..., 0::2], x[..., 1::2]
    out = np.empty_like(x)
    out[..., 0::2] = x0 * c - x1 * s
    out[..., 1::2] = x0 * s + x1 * c
    return out


def rope_half_split(x, cos, sin):
    """x [T, ..., d]: rotate pairs (x[i], x[i+d/2]) by angle pos*inv_freq[i] (NEOX layout)."""
    shp = (x.shape[0],) + (1,) * (x.ndim - 2) + (cos.shape[1],)
    c, s = cos.reshape(shp), sin.reshape(shp)
    h = x.shape[-1] // 2
    x0, x1 = x[..., :h], x[..., h:]
    return np.concatenate([x0 * c - x1 * s, x0 * s + x1 * c], axis=-1)


# ----------------------------------------------------------------------------------------------
# building blocks
# ----------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * w


def layer_norm(x, w, b, eps=1e-6):
    mu = np.mean(x, axis=-1, keepdims=True)
    var = np.mean((x - mu) ** 2, axis=-1, keepdims=True)      # biased variance
    return (x - mu) / np.sqrt(var + eps) * w + b


def silu(x):
    return x / (1.0 + np.exp(-x))


def swiglu(x, wg, wu, wd):
    """x [T, H]; wg, wu [I, H]; wd [H, I] -> [T, H]."""
    return (silu(x @ wg.T) * (x @ wu.T)) @ wd.T


def softmax(x, axis=-1):
    m = np.max(x, axis=axis, keepdims=True)
    e = np.exp(x - m)
    return e / np.sum(e, axis=axis, keepdims=True)


def stable_topk(scores, k):
    """Indices of the k largest entries of each row of scores [N, M], ties toward the lower index,
    sorted best first."""
    return np.argsort(-scores, axis=-1, kind="stable")[:, :k]


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------

class DeepSeek:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = Config(json.load(f))
        st = SafeTensors(model_dir)
        self.w = {}
        for name in st.entries:
            if name.endswith("_scale_inv"):
                continue
            if name.endswith(".weight_packed"):  # int4: <module>.weight from its three parts
                name = name[: -len("_packed")]
            elif name.endswith((".weight_scale", ".weight_shape")):
                continue
            self.w[name] = st.get(name)
        c = self.cfg
        if "lm_head.weight" not in self.w or c.tie_embeddings:
            self.w["lm_head.weight"] = self.w["model.embed_tokens.weight"]
        # softmax scale of MLA: qk_head_dim^-0.5, times mscale^2 with YaRN and mscale_all_dim set
        self.softmax_scale = c.d_qk ** -0.5
        rs = c.rope_scaling
        if rs and rs.get("type", rs.get("rope_type")) == "yarn" and rs.get("mscale_all_dim"):
            m = yarn_mscale(rs["factor"], rs["mscale_all_dim"])
            self.softmax_scale *= m * m
        self.stats = {}

    def W(self, name):
        return self.w[name]

    # --- DeepSeek-V3.2 lightning indexer -------------------------------------------------------
    def indexer_mask(self, p, x, qr, cos, sin):
        """Key selection of the lightning indexer.
        x [T, H] (input_layernorm output), qr [T, q_lora] (q_a_layernorm output).
        Returns allowed [T, T] bool (query t may attend key s) and the smallest selection margin."""
        c = self.cfg
        T = x.shape[0]
        Hi, Di, K, dr = c.index_heads, c.index_dim, c.index_topk, c.d_rope
        q = (qr @ self.W(p + "indexer.wq_b.weight").T).reshape(T, Hi, Di)        # [T, Hi, Di]
        k = layer_norm(x @ self.W(p + "indexer.wk.weight").T,                     # [T, Di]
                       self.W(p + "indexer.k_norm.weight"), self.W(p + "indexer.k_norm.bias"), 1e-6)
        # RoPE on the FIRST dr dims, half-split layout (rotary part first, unlike MLA)
        q = np.concatenate([rope_half_split(q[..., :dr], cos, sin), q[..., dr:]], axis=-1)
        k = np.concatenate([rope_half_split(k[:, :dr], cos, sin), k[:, dr:]], axis=-1)
        w = (x @ self.W(p + "indexer.weights_proj.weight").T) * Hi ** -0.5 * Di ** -0.5   # [T, Hi]
        dots = np.einsum("thd,sd->ths", q, k)                                      # [T, Hi, S]
        qk = np.maximum(dots, 0.0)                                                  # relu
        I = np.einsum("th,ths->ts", w, qk)                                          # [T, S]
        A = np.einsum("th,ths->ts", np.abs(w), qk)                                  # margin normaliser
        causal = np.tril(np.ones((T, T), dtype=bool))
        allowed = causal.copy()
        min_margin = math.inf
        if T > K:
            rows = np.arange(K, T)                          # queries with t + 1 > K: sparse
            Ir = np.where(causal[rows], I[rows], -np.inf)   # [R, S]
            order = np.argsort(-Ir, axis=-1, kind="stable")   # ties toward the lower position
            sel = order[:, :K]
            allowed[rows] = False
            allowed[rows[:, None], sel] = True
            kth = np.take_along_axis(Ir, order[:, K - 1:K], axis=1)[:, 0]
            nxt = np.take_along_axis(Ir, order[:, K:K + 1], axis=1)[:, 0]   # exists: t+1 > K
            amax = np.max(np.where(causal[rows], A[rows], 0.0), axis=-1)
            gap = kth - nxt
            margin = np.where(amax > 0, gap / np.where(amax > 0, amax, 1.0), 0.0)
            # An exact tie at I = 0 (fewer than K keys score above 0; the rest of the selection
            # is the earliest zero-scoring keys) is exact in float32 too, as long as no key moves
            # between scoring above, at or below 0: its margin is how far every head's dot and
            # every nonzero score stays from 0, relative to the row's largest.
            zero_tie = (gap == 0) & (kth == 0)
            if np.any(zero_tie):
                zr = rows[zero_tie]
                vis = causal[zr]                                                   # [Z, S]
                d = np.abs(dots[zr])                                               # [Z, Hi, S]
                dmax = np.max(np.where(vis[:, None, :], d, 0.0), axis=(1, 2))
                dmin = np.min(np.where(vis[:, None, :], d, np.inf), axis=(1, 2))
                nz = np.abs(I[zr])
                imin = np.min(np.where(vis & (nz > 0), nz, np.inf), axis=-1)
                am = amax[zero_tie]
                clip = np.minimum(dmin / np.where(dmax > 0, dmax, 1.0),
                                  np.where(np.isinf(imin), np.inf, imin / np.where(am > 0, am, 1.0)))
                margin[zero_tie] = clip
            min_margin = float(np.min(margin))
        return allowed, min_margin

    # --- MLA ----------------------------------------------------------------------------------
    def mla(self, i, x, cos, sin):
        """x [T, H] (input_layernorm output) -> [T, H]. Plain (non-absorbed) attention."""
        c = self.cfg
        p = f"model.layers.{i}.self_attn."
        T, nh = x.shape[0], c.n_heads
        qr = None
        if c.q_lora_rank:
            qr = rms_norm(x @ self.W(p + "q_a_proj.weight").T, self.W(p + "q_a_layernorm.weight"), c.eps)
            q = qr @ self.W(p + "q_b_proj.weight").T                       # [T, nh*d_qk]
        else:
            q = x @ self.W(p + "q_proj.weight").T
        q = q.reshape(T, nh, c.d_qk)
        q_nope, q_pe = q[..., :c.d_nope], rope_interleaved(q[..., c.d_nope:], cos, sin)
        kv = x @ self.W(p + "kv_a_proj_with_mqa.weight").T                # [T, kv_lora + d_rope]
        ckv = rms_norm(kv[:, :c.kv_lora_rank], self.W(p + "kv_a_layernorm.weight"), c.eps)
        k_pe = rope_interleaved(kv[:, c.kv_lora_rank:], cos, sin)          # [T, d_rope], shared
        kvb = (ckv @ self.W(p + "kv_b_proj.weight").T).reshape(T, nh, c.d_nope + c.d_v)
        k_nope, v = kvb[..., :c.d_nope], kvb[..., c.d_nope:]               # [T, nh, *]
        scores = (np.einsum("thd,shd->hts", q_nope, k_nope)
                  + np.einsum("thd,sd->hts", q_pe, k_pe)) * self.softmax_scale    # [nh, T, S]
        allowed = np.tril(np.ones((T, T), dtype=bool))
        if c.has_indexer and (p + "indexer.wq_b.weight") in self.w:
            allowed, margin = self.indexer_mask(p, x, qr, cos, sin)
            self.stats["min_selection_margin"] = min(self.stats.get("min_selection_margin", math.inf), margin)
        scores = np.where(allowed[None], scores, -np.inf)
        probs = softmax(scores, axis=-1)
        out = np.einsum("hts,shd->thd", probs, v).reshape(T, nh * c.d_v)
        return out @ self.W(p + "o_proj.weight").T

    # --- MoE ----------------------------------------------------------------------------------
    def route(self, x, p):
        """Router. x [T, H] -> (experts [T, k], weights [T, k]); records the smallest selection gap."""
        c = self.cfg
        logits = x @ self.W(p + "gate.weight").T                            # [T, E] (float64)
        scores = softmax(logits) if c.scoring == "softmax" else 1.0 / (1.0 + np.exp(-logits))
        T, E = scores.shape
        choice = scores.copy()
        if c.topk_method == "noaux_tc":
            choice = scores + self.W(p + "gate.e_score_correction_bias")[None, :]   # selection only
        group_gap = math.inf
        if c.topk_method in ("group_limited_greedy", "noaux_tc") and c.n_group > 1:
            g = choice.reshape(T, c.n_group, E // c.n_group)
            if c.topk_method == "noaux_tc":
                gscore = np.sort(g, axis=-1)[..., -2:].sum(axis=-1)           # sum of top-2 per group
            else:
                gscore = g.max(axis=-1)
            gsel = stable_topk(gscore, c.topk_group)                          # [T, topk_group]
            keep = np.zeros((T, c.n_group), dtype=bool)
            np.put_along_axis(keep, gsel, True, axis=1)
            if c.topk_group < c.n_group:
                gs = -np.sort(-gscore, axis=-1)
                group_gap = float(np.min(gs[:, c.topk_group - 1] - gs[:, c.topk_group]))
            choice = np.where(np.repeat(keep, E // c.n_group, axis=1), choice, -np.inf)
        idx = stable_topk(choice, c.top_k)                                    # [T, k]
        cs = -np.sort(-choice, axis=-1)
        gap = group_gap
        if c.top_k < E and np.all(np.isfinite(cs[:, c.top_k])):
            gap = min(gap, float(np.min(cs[:, c.top_k - 1] - cs[:, c.top_k])))
        elif c.top_k < E:
            fin = np.isfinite(cs[:, c.top_k])
            if np.any(fin):
                gap = min(gap, float(np.min(cs[fin, c.top_k - 1] - cs[fin, c.top_k])))
        self.stats["min_router_gap"] = min(self.stats.get("min_router_gap", math.inf), gap)
        wts = np.take_along_axis(scores, idx, axis=1)                         # unbiased scores
        if c.topk_method == "noaux_tc":
            # DeepSeek-V3: normalise if norm_topk_prob, then always scale
            if c.norm_topk_prob:
                wts = wts / wts.sum(axis=-1, keepdims=True)
            wts = wts * c.routed_scale
        else:
            # DeepSeek-V2: normalise (top_k > 1 and norm_topk_prob) or else scale
            if c.top_k > 1 and c.norm_topk_prob:
                wts = wts / (wts.sum(axis=-1, keepdims=True) + 1e-20)
            else:
                wts = wts * c.routed_scale
        return idx, wts

    def moe(self, i, x):
        """x [T, H] (post_attention_layernorm output) -> [T, H]."""
        c = self.cfg
        p = f"model.layers.{i}.mlp."
        idx, wts = self.route(x, p)
        y = np.zeros_like(x)
        for e in np.unique(idx):
            rows, slot = np.nonzero(idx == e)
            ep = p + f"experts.{e}."
            y[rows] += swiglu(x[rows], self.W(ep + "gate_proj.weight"), self.W(ep + "up_proj.weight"),
                              self.W(ep + "down_proj.weight")) * wts[rows, slot][:, None]
        if c.n_shared:
            sp = p + "shared_experts."
            y += swiglu(x, self.W(sp + "gate_proj.weight"), self.W(sp + "up_proj.weight"),
                        self.W(sp + "down_proj.weight"))
        return y

    def mlp(self, i, x):
        p = f"model.layers.{i}.mlp."
        return swiglu(x, self.W(p + "gate_proj.weight"), self.W(p + "up_proj.weight"), self.W(p + "down_proj.weight"))

    # --- whole model --------------------------------------------------------------------------
    def forward(self, ids):
        """ids [T] -> logits [T, V] (float64), positions 0..T-1."""
        c = self.cfg
        T = len(ids)
        cos, sin = rope_cos_sin(c, T)
        h = self.W("model.embed_tokens.weight")[np.asarray(ids, dtype=np.int64)]   # [T, H]
        for i in range(c.n_layers):
            p = f"model.layers.{i}."
            h = h + self.mla(i, rms_norm(h, self.W(p + "input_layernorm.weight"), c.eps), cos, sin)
            x = rms_norm(h, self.W(p + "post_attention_layernorm.weight"), c.eps)
            h = h + (self.moe(i, x) if c.is_moe_layer(i) else self.mlp(i, x))
        h = rms_norm(h, self.W("model.norm.weight"), c.eps)
        return h @ self.W("lm_head.weight").T


def argmax_low(v):
    """argmax with ties to the lower id (np.argmax returns the first maximum)."""
    return int(np.argmax(v))


def run_prompt(model, ids, n_new):
    model.stats = {}
    seq = list(ids)
    logits = model.forward(seq)
    last = logits[-1]
    prompt_stats = dict(model.stats)
    greedy, greedy_logits = [], []
    step_logits = last
    for step in range(n_new):
        tok = argmax_low(step_logits)
        greedy.append(tok)
        greedy_logits.append(step_logits)
        seq.append(tok)
        if step + 1 < n_new:
            step_logits = model.forward(seq)[-1]
    out = {
        "ids": list(ids),
        "last_logits": last.tolist(),
        "greedy": greedy,
        "greedy_logits": [g.tolist() for g in greedy_logits],
    }
    if greedy_logits:
        margins = []
        for g in greedy_logits:
            s = np.sort(g)
            margins.append(float(s[-1] - s[-2]))
        out["greedy_margins"] = margins
    if model.cfg.has_indexer:
        m = model.stats.get("min_selection_margin", math.inf)
        # null: no query was sparse (every sequence was at most index_topk tokens)
        out["min_selection_margin"] = None if m == math.inf else m
        m = prompt_stats.get("min_selection_margin", math.inf)
        out["min_selection_margin_prompt"] = None if m == math.inf else m
    if "min_router_gap" in model.stats:
        g = model.stats["min_router_gap"]
        out["min_router_gap"] = None if g == math.inf else g
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HuggingFace model directory")
    ap.add_argument("--input", required=True, help='JSON {"prompts": [{"ids": [...]}, ...]}')
    ap.add_argument("--output", required=True, help="output JSON")
    ap.add_argument("--max-new-tokens", type=int, default=0, help="greedy tokens per prompt (default 0)")
    args = ap.parse_args(argv)

    t0 = time.time()
    model = DeepSeek(args.model)
    with open(args.input) as f:
        prompts = json.load(f)["prompts"]
    results = []
    for pr in prompts:
        ids = [int(t) for t in pr["ids"]]
        if not ids:
            raise ValueError("empty prompt")
        results.append(run_prompt(model, ids, args.max_new_tokens))
    out = {"model": os.path.abspath(args.model), "model_type": model.cfg.model_type,
           "max_new_tokens": args.max_new_tokens, "prompts": results,
           "seconds": round(time.time() - t0, 3)}
    with open(args.output, "w") as f:
        json.dump(out, f)
    return 0


if __name__ == "__main__":
    sys.exit(main())
