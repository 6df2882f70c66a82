#!/usr/bin/env python3
"""Float64 numpy reference forward of DeepSeek-V4 models from a HuggingFace directory.

Written from the rules of DeepSeek's V4-Flash inference code (`inference/model.py` and `kernel.py`):
hyper-connections (hc_mult residual streams mixed by hc_pre / hc_post, with DeepSeek's Sinkhorn),
single-row MQA attention with an attention sink over a sliding window plus compressed KV entries
(HCA: every complete entry; CSA: the indexer's top-k entries), the grouped low-rank output
projection, and the MoE with hash-routed first layers and clamped SwiGLU experts. No code was copied.
Everything is computed in float64 from the stored weights: BF16 / F32, FP8 E4M3 with E8M0 128x128
block scales and FP4 E2M1 experts with E8M0 1x32 scales, each dequantized exactly.

Deliberate deviation: DeepSeek's kernels also round activations (the inputs of FP8 / FP4 GEMMs and
the KV rows' non-RoPE dims to FP8, the indexer's q and keys to FP4 after a Hadamard rotation). That
is their GPU storage format, not part of the model's rules; nothing is rounded here. The Hadamard
rotation is orthogonal and applied to both q and keys, so without the rounding it cancels in q.k and
is skipped. See README.md.

    python3 tests/reference/deepseek_v4_reference.py --model DIR --input IN.json --output OUT.json \
        [--max-new-tokens N] [--mtp] [--self-check]

IN.json:  {"prompts": [{"ids": [...]}, ...]}
OUT.json: {"prompts": [{"ids", "last_logits", "greedy", "greedy_logits", "greedy_margins",
          "min_router_gap", "min_selection_margin", "mtp_logits" (--mtp), ...}]} (see README.md).

All T positions of a sequence are computed in one causal pass (prefill form) with each query's exact
visibility. Greedy decoding recomputes the whole sequence at every step, takes argmax with ties to
the lower id and ignores EOS.
"""

import argparse
import json
import math
import os
import sys
import time
from types import SimpleNamespace

try:
    import numpy as np
except ImportError:                 # e.g. a pyenv python3 ahead of Debian's, which has python3-numpy
    if os.path.realpath(sys.executable) != os.path.realpath("/usr/bin/python3") and os.path.exists("/usr/bin/python3"):
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

from deepseek_reference import (SafeTensors, _decode, rms_norm, rope_interleaved,
                                rope_inv_freq, run_prompt, silu, softmax, stable_topk)


# ----------------------------------------------------------------------------------------------
# checkpoint: BF16 / F32, FP8 E4M3 + E8M0 block scales, FP4 E2M1 + E8M0 group scales
# ----------------------------------------------------------------------------------------------

def _e2m1_table():
    """float64 value of each 4-bit E2M1 code: bits s e e m, magnitudes {0,.5,1,1.5,2,3,4,6}."""
    mag = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])
    return np.concatenate([mag, -mag])


E2M1 = _e2m1_table()


def e8m0(raw):
    """Bytes of F8_E8M0 scales -> float64 2^(e-127). 255 is NaN and rejected."""
    e = np.frombuffer(raw, dtype=np.uint8)
    if np.any(e == 255):
        raise ValueError("E8M0 scale byte 255 (NaN)")
    return np.ldexp(1.0, e.astype(np.int64) - 127)


def block_scales(scale, shape, block):
    """scale [ceil(rows/b0), ceil(cols/b1)] -> [rows, cols], each block's scale repeated."""
    (rows, cols), (b0, b1) = shape, block
    if scale.shape != (-(-rows // b0), -(-cols // b1)):
        raise ValueError(f"scale grid {scale.shape} does not fit {shape} in {b0}x{b1} blocks")
    return np.repeat(np.repeat(scale, b0, axis=0), b1, axis=1)[:rows, :cols]


def unpack_fp4(codes, scale):
    """codes uint8 [rows, cols/2] (low nibble = even column), scale [rows, cols/g] -> [rows, cols]."""
    rows = codes.shape[0]
    q = np.empty((rows, 2 * codes.shape[1]))
    q[:, 0::2] = E2M1[codes & 0xF]
    q[:, 1::2] = E2M1[codes >> 4]
    if q.shape[1] % scale.shape[1] or scale.shape[0] != rows:
        raise ValueError(f"FP4 scale {scale.shape} does not fit {q.shape}")
    return q * np.repeat(scale, q.shape[1] // scale.shape[1], axis=1)


class Checkpoint:
    """Tensors of a model directory by name, as float64, dequantized on first use. How a `.weight`
    is stored decides how it is read: F8_E4M3 with `<module>.scale` (E8M0 or float, block scales),
    I8 with `<module>.scale` (packed FP4 E2M1, one scale per group of columns), or plain."""

    def __init__(self, model_dir, block):
        self.st = SafeTensors(model_dir)
        self.block = block
        self.cache = {}

    def __contains__(self, name):
        return name in self.st.entries

    def __getitem__(self, name):
        if name not in self.cache:
            self.cache[name] = self._load(name)
        return self.cache[name]

    def _bytes(self, name):
        path, dtype, shape, begin, end = self.st.entries[name]
        with open(path, "rb") as f:
            f.seek(begin)
            return dtype, shape, f.read(end - begin)

    def _plain(self, name):
        dtype, shape, raw = self._bytes(name)
        if dtype == "F8_E8M0":
            return e8m0(raw).reshape(shape)
        return _decode(dtype, raw, shape)

    def _load(self, name):
        dtype = self.st.dtypes[name]
        scale = name[: -len(".weight")] + ".scale" if name.endswith(".weight") else None
        if dtype == "I8" and scale in self:
            _, shape, raw = self._bytes(name)
            return unpack_fp4(np.frombuffer(raw, dtype=np.uint8).reshape(shape), self._plain(scale))
        w = self._plain(name)
        if dtype.startswith("F8_"):
            w = w * block_scales(self._plain(scale), w.shape, self.block)
        return w


# ----------------------------------------------------------------------------------------------
# configuration
# ----------------------------------------------------------------------------------------------

class V4Config:
    def __init__(self, cfg):
        self.raw = cfg
        self.model_type = cfg.get("model_type", "deepseek_v4")
        self.vocab = cfg["vocab_size"]
        self.hidden = cfg["hidden_size"]
        self.n_layers = cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        # attention
        self.n_heads = cfg["num_attention_heads"]
        self.head_dim = cfg["head_dim"]
        self.rope_dim = cfg["qk_rope_head_dim"]
        self.q_lora = cfg["q_lora_rank"]
        self.o_lora = cfg["o_lora_rank"]
        self.o_groups = cfg["o_groups"]
        self.window = cfg["sliding_window"]
        self.n_mtp = cfg.get("num_nextn_predict_layers", 0)
        ratios = list(cfg["compress_ratios"])
        if len(ratios) < self.n_layers:
            raise ValueError(f"compress_ratios has {len(ratios)} entries for {self.n_layers} layers")
        # layer n_layers is the MTP block's (window only where the list stops at the decoder's)
        self.ratios = (ratios + [0] * self.n_mtp)[: self.n_layers + self.n_mtp]
        self.rope_theta = cfg.get("rope_theta", 10000.0)
        self.compress_rope_theta = cfg.get("compress_rope_theta") if any(self.ratios) else None
        if any(self.ratios) and self.compress_rope_theta is None:
            raise ValueError("compress_rope_theta is required with compressed layers")
        rs = cfg.get("rope_scaling") or {}
        self.yarn = dict(rs, type="yarn") if rs.get("original_max_position_embeddings", 0) > 0 else None
        self.index_heads = cfg.get("index_n_heads")
        self.index_dim = cfg.get("index_head_dim")
        self.index_topk = cfg.get("index_topk")
        # MoE
        self.n_routed = cfg["n_routed_experts"]
        self.n_shared = cfg.get("n_shared_experts") or 0
        self.top_k = cfg["num_experts_per_tok"]
        self.n_hash = cfg.get("num_hash_layers", 0)
        self.scoring = cfg.get("scoring_func", "sqrtsoftplus")
        if self.scoring not in ("softmax", "sigmoid", "sqrtsoftplus"):
            raise ValueError(f"scoring_func {self.scoring}")
        self.routed_scale = cfg.get("routed_scaling_factor", 1.0)
        self.swiglu_limit = cfg.get("swiglu_limit") or 0.0
        # hyper-connections
        self.hc = cfg["hc_mult"]
        self.sinkhorn_iters = cfg.get("hc_sinkhorn_iters", 20)
        self.hc_eps = cfg.get("hc_eps", 1e-6)
        self.tie_embeddings = bool(cfg.get("tie_word_embeddings", False))
        quant = cfg.get("quantization_config") or {}
        self.block = tuple(quant.get("weight_block_size", (128, 128)))
        # run_prompt reports min_selection_margin (null when no CSA query had more than index_topk
        # visible entries)
        self.has_indexer = True


# ----------------------------------------------------------------------------------------------
# small functions
# ----------------------------------------------------------------------------------------------

def sigmoid(x):
    return np.exp(-np.logaddexp(0.0, -x))


def router_scores(logits, scoring):
    """logits [T, E] -> affinity scores [T, E]."""
    if scoring == "softmax":
        return softmax(logits, axis=-1)
    if scoring == "sigmoid":
        return sigmoid(logits)
    return np.sqrt(np.logaddexp(0.0, logits))           # sqrt(softplus)


def rope_tail(x, cos, sin):
    """x [N, ..., D]: rotate interleaved pairs of the last rd = 2 * cos.shape[1] dims by each row's
    angle (cos, sin [N, rd/2]); the first D - rd dims pass through."""
    rd = 2 * cos.shape[1]
    return np.concatenate([x[..., : x.shape[-1] - rd], rope_interleaved(x[..., -rd:], cos, sin)], axis=-1)


def window_mask(T, W):
    """[T, T]: query s sees the raw rows of positions max(0, s-W+1)..s."""
    s, t = np.arange(T)[:, None], np.arange(T)[None, :]
    return (t <= s) & (t > s - W)


def compressed_mask(T, r):
    """[T, T // r]: query s sees the complete entries e < (s + 1) // r."""
    return np.arange(T // r)[None, :] < (np.arange(T)[:, None] + 1) // r


# --- hyper-connections ------------------------------------------------------------------------

def sinkhorn(logits, iters, eps):
    """logits [T, hc, hc] -> nearly doubly stochastic comb, as DeepSeek's kernel: softmax over each
    row plus eps, a column normalisation, then iters - 1 rounds of rows then columns (each sum + eps)."""
    c = softmax(logits, axis=-1) + eps
    c = c / (c.sum(axis=1, keepdims=True) + eps)
    for _ in range(iters - 1):
        c = c / (c.sum(axis=2, keepdims=True) + eps)
        c = c / (c.sum(axis=1, keepdims=True) + eps)
    return c


def hc_mixes(X, fn, eps):
    """X [T, hc, H], fn [m, hc*H] -> (fn . xf) / rms(xf)  [T, m], xf = X[t] flattened."""
    xf = X.reshape(X.shape[0], -1)
    return (xf @ fn.T) / np.sqrt(np.mean(xf * xf, axis=-1, keepdims=True) + eps)


def hc_pre(X, fn, scale, base, cfg):
    """X [T, hc, H] -> y [T, H] (the sublayer's input), post [T, hc], comb [T, hc, hc]."""
    n = cfg.hc
    mixes = hc_mixes(X, fn, cfg.eps)                                             # [T, (2+hc)*hc]
    pre = sigmoid(mixes[:, :n] * scale[0] + base[:n]) + cfg.hc_eps               # [T, hc]
    post = 2.0 * sigmoid(mixes[:, n:2 * n] * scale[1] + base[n:2 * n])           # [T, hc]
    comb = (mixes[:, 2 * n:] * scale[2] + base[2 * n:]).reshape(-1, n, n)        # [T, hc, hc]
    comb = sinkhorn(comb, cfg.sinkhorn_iters, cfg.hc_eps)
    return np.einsum("ti,tih->th", pre, X), post, comb


def hc_post(y, X, post, comb):
    """y [T, H], X [T, hc, H] -> X' [T, hc, H]: X'[j] = post[j] y + sum_i comb[i, j] X[i]."""
    return post[:, :, None] * y[:, None, :] + np.einsum("tij,tih->tjh", comb, X)


def hc_head(X, fn, scale, base, cfg):
    """X [T, hc, H] -> [T, H]: the final weighted sum of the streams (sigmoid weights, no Sinkhorn)."""
    pre = sigmoid(hc_mixes(X, fn, cfg.eps) * scale[0] + base) + cfg.hc_eps     # [T, hc]
    return np.einsum("ti,tih->th", pre, X)


# --- attention pieces -------------------------------------------------------------------------

def compress_pool(kvp, sc, r, D):
    """Gated pooling of the complete windows. kvp, sc [T, c*D] (sc with ape added) -> [T // r, D].
    Entry e pools positions e*r..e*r+r-1 (dims [0:D) without overlap, [D:2D) with it); with overlap
    (r == 4) also the previous window's positions with dims [0:D). Softmax per dim over candidates."""
    E, cD = kvp.shape[0] // r, kvp.shape[1]
    if E == 0:
        return np.zeros((0, D))
    kv = kvp[: E * r].reshape(E, r, cD)                                          # [E, r, c*D]
    s = sc[: E * r].reshape(E, r, cD)
    if r == 4:                                                                   # overlap
        prev_kv = np.zeros((E, r, D))
        prev_s = np.full((E, r, D), -np.inf)                                     # none for e == 0
        prev_kv[1:], prev_s[1:] = kv[:-1, :, :D], s[:-1, :, :D]
        kv = np.concatenate([prev_kv, kv[:, :, D:]], axis=1)                     # [E, 2r, D]
        s = np.concatenate([prev_s, s[:, :, D:]], axis=1)
    return np.sum(softmax(s, axis=1) * kv, axis=1)                               # [E, D]


def sink_attention(q, rows, visible, sink, scale):
    """q [T, nh, d]; rows [N, d] (each row is key and value, shared by all heads); visible [T, N];
    sink [nh] -> o [T, nh, d]. Softmax over the visible rows plus a sink of value 0."""
    s = np.einsum("thd,nd->thn", q, rows) * scale                                # [T, nh, N]
    s = np.where(visible[:, None, :], s, -np.inf)
    m = np.maximum(s.max(axis=-1), sink[None, :])                                # [T, nh]
    e = np.exp(s - m[:, :, None])
    denom = e.sum(axis=-1) + np.exp(sink[None, :] - m)
    return np.einsum("thn,nd->thd", e, rows) / denom[:, :, None]


def grouped_output(o, wo_a, wo_b, groups):
    """o [T, nh, d] -> [T, H]: o viewed as [T, G, nh*d/G]; z_g = wo_a[g] o_g ([o_lora]); wo_b [z_g]."""
    T = o.shape[0]
    og = o.reshape(T, groups, -1)                                                # [T, G, nh*d/G]
    z = np.einsum("tgk,grk->tgr", og, wo_a.reshape(groups, -1, og.shape[2]))     # [T, G, o_lora]
    return z.reshape(T, -1) @ wo_b.T


def topk_visible(score, visible, k):
    """score, visible [T, E] -> chosen [T, E] bool: each row's min(k, #visible) highest visible
    scores, ties to the lower index; and the order of each row (best first)."""
    order = np.argsort(-np.where(visible, score, -np.inf), axis=-1, kind="stable")
    chosen = np.zeros_like(visible)
    np.put_along_axis(chosen, order[:, :k], True, axis=1)
    return chosen & visible, order


def selection_margin(score, visible, order, k, w, dots):
    """Smallest gap between the k-th and (k+1)-th visible score over rows with more than k visible
    entries (inf if none). A row whose k-th and (k+1)-th scores are both exactly 0 (fewer than k
    entries score above 0; the earliest zero-scoring entries complete the selection) is exact in
    float32 as long as no entry moves between scoring above, at or below 0: its margin is the
    smallest |w[s,h] * dots[s,h,e]| or nonzero |score[s,e]| over its visible entries."""
    rows = np.nonzero(visible.sum(axis=1) > k)[0]
    if rows.size == 0:
        return math.inf
    kth = np.take_along_axis(score[rows], order[rows, k - 1:k], axis=1)[:, 0]
    nxt = np.take_along_axis(score[rows], order[rows, k:k + 1], axis=1)[:, 0]
    margin = kth - nxt
    for j in np.nonzero((margin == 0) & (kth == 0))[0]:
        s, vis = rows[j], visible[rows[j]]
        flip = np.abs(w[s][:, None] * dots[s][:, vis])                          # [ih, #visible]
        nz = np.abs(score[s, vis])
        margin[j] = min(flip[flip > 0].min(initial=math.inf), nz[nz > 0].min(initial=math.inf))
    return float(margin.min())


# --- MoE --------------------------------------------------------------------------------------

def swiglu_expert(x, w1, w2, w3, limit):
    """x [N, H] -> [N, H]: w2 (silu(g) * u), g = w1 x clamped above at limit, u = w3 x clamped to
    [-limit, limit] (no clamp when limit is 0)."""
    g, u = x @ w1.T, x @ w3.T
    if limit > 0:
        g, u = np.minimum(g, limit), np.clip(u, -limit, limit)
    return (silu(g) * u) @ w2.T


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------

class DeepSeekV4:
    def __init__(self, model_dir):
        with open(os.path.join(model_dir, "config.json")) as f:
            self.cfg = V4Config(json.load(f))
        self.w = Checkpoint(model_dir, self.cfg.block)
        self.head_name = "head.weight"
        if self.cfg.tie_embeddings or "head.weight" not in self.w:
            self.head_name = "embed.weight"
        self.stats = {}

    def prefix(self, i):
        """Layer i's tensor names: layers.i., or mtp.0. for the MTP block's layer (i == n_layers)."""
        return "mtp.0." if i == self.cfg.n_layers else f"layers.{i}."

    def note(self, key, value):
        self.stats[key] = min(self.stats.get(key, math.inf), value)

    def rope(self, i, T):
        """cos, sin [T, rd/2] of layer i for positions 0..T-1: rope_theta without YaRN on r == 0
        layers, compress_rope_theta with DeepSeek's YaRN (when configured) on compressed ones."""
        c = self.cfg
        if c.ratios[i]:
            spec = SimpleNamespace(d_rope=c.rope_dim, rope_theta=c.compress_rope_theta, rope_scaling=c.yarn)
        else:
            spec = SimpleNamespace(d_rope=c.rope_dim, rope_theta=c.rope_theta, rope_scaling=None)
        ang = np.arange(T, dtype=np.float64)[:, None] * rope_inv_freq(spec)[None, :]
        return np.cos(ang), np.sin(ang)

    # --- compressor and indexer ---------------------------------------------------------------
    def compressor_inputs(self, p, x, r):
        """x [T, H] -> kvp, sc [T, c*D]: the candidate rows and their gate scores (+ ape[t % r])."""
        W = self.w
        sc = x @ W[p + "wgate.weight"].T + W[p + "ape"][np.arange(x.shape[0]) % r]
        return x @ W[p + "wkv.weight"].T, sc

    def compressor(self, p, x, r, D, cos, sin):
        """x [T, H] -> the complete compressed entries [T // r, D], normed, roped at e*r."""
        kvp, sc = self.compressor_inputs(p, x, r)
        out = rms_norm(compress_pool(kvp, sc, r, D), self.w[p + "norm.weight"], self.cfg.eps)
        pos = np.arange(out.shape[0]) * r                                        # window's first token
        return rope_tail(out, cos[pos], sin[pos])

    def indexer(self, p, x, qr, cos, sin):
        """Which compressed entries (ratio 4) each query attends: [T, T // 4] bool."""
        c, W = self.cfg, self.w
        T, ih, dim, K = x.shape[0], c.index_heads, c.index_dim, c.index_topk
        q = rope_tail((qr @ W[p + "wq_b.weight"].T).reshape(T, ih, dim), cos, sin)   # [T, ih, id]
        keys = self.compressor(p + "compressor.", x, 4, dim, cos, sin)               # [E, id]
        w = (x @ W[p + "weights_proj.weight"].T) * (dim ** -0.5 * ih ** -0.5)        # [T, ih]
        dots = np.einsum("thd,ed->the", q, keys)                                      # [T, ih, E]
        score = np.einsum("th,the->te", w, np.maximum(dots, 0.0))                     # [T, E]
        visible = compressed_mask(T, 4)
        chosen, order = topk_visible(score, visible, K)
        self.note("min_selection_margin", selection_margin(score, visible, order, K, w, dots))
        return chosen

    # --- attention ----------------------------------------------------------------------------
    def attention(self, i, x):
        """x [T, H] (after attn_norm) -> [T, H]."""
        c, W, p = self.cfg, self.w, self.prefix(i) + "attn."
        T, nh, d, r = x.shape[0], c.n_heads, c.head_dim, c.ratios[i]
        cos, sin = self.rope(i, T)
        qr = rms_norm(x @ W[p + "wq_a.weight"].T, W[p + "q_norm.weight"], c.eps)       # [T, q_lora]
        q = (qr @ W[p + "wq_b.weight"].T).reshape(T, nh, d)
        q = rope_tail(rms_norm(q, 1.0, c.eps), cos, sin)                              # [T, nh, d]
        kv = rms_norm(x @ W[p + "wkv.weight"].T, W[p + "kv_norm.weight"], c.eps)
        rows, visible = rope_tail(kv, cos, sin), window_mask(T, c.window)           # [T, d], [T, T]
        if r:
            comp = self.compressor(p + "compressor.", x, r, d, cos, sin)              # [T//r, d]
            if r == 4:                                                                # CSA: top-k
                cvis = self.indexer(p + "indexer.", x, qr, cos, sin)                  # [T, T//4]
            else:                                                                     # HCA: all
                cvis = compressed_mask(T, r)                                          # [T, T//r]
            rows = np.concatenate([rows, comp])
            visible = np.concatenate([visible, cvis], axis=1)
        o = sink_attention(q, rows, visible, W[p + "attn_sink"], d ** -0.5)           # [T, nh, d]
        o = rope_tail(o, cos, -sin)                                                   # de-rotate
        return grouped_output(o, W[p + "wo_a.weight"], W[p + "wo_b.weight"], c.o_groups)

    # --- MoE ----------------------------------------------------------------------------------
    def route(self, i, x, ids):
        """x [T, H] -> experts [T, k], weights [T, k]."""
        c, p = self.cfg, self.prefix(i) + "ffn.gate."
        s = router_scores(x @ self.w[p + "weight"].T, c.scoring)                      # [T, E]
        if i < c.n_hash:
            experts = self.w[p + "tid2eid"][ids].astype(np.int64)
        else:
            choice = s + self.w[p + "bias"][None, :]                                  # selection only
            experts = stable_topk(choice, c.top_k)
            if c.top_k < choice.shape[1]:
                cs = -np.sort(-choice, axis=-1)
                self.note("min_router_gap", float(np.min(cs[:, c.top_k - 1] - cs[:, c.top_k])))
        weights = np.take_along_axis(s, experts, axis=1)
        if c.scoring != "softmax":
            weights = weights / weights.sum(axis=-1, keepdims=True)
        return experts, weights * c.routed_scale

    def expert(self, p, x):
        W = self.w
        return swiglu_expert(x, W[p + "w1.weight"], W[p + "w2.weight"], W[p + "w3.weight"], self.cfg.swiglu_limit)

    def moe(self, i, x, ids):
        """x [T, H] (after ffn_norm) -> [T, H]: routed experts plus the shared expert."""
        p = self.prefix(i) + "ffn."
        experts, weights = self.route(i, x, ids)
        y = np.zeros_like(x)
        for e in np.unique(experts):
            rows, slot = np.nonzero(experts == e)
            y[rows] += weights[rows, slot, None] * self.expert(p + f"experts.{e}.", x[rows])
        if self.cfg.n_shared:
            y += self.expert(p + "shared_experts.", x)
        return y

    # --- blocks and the whole model -----------------------------------------------------------
    def hc_pre(self, i, kind, X):
        p = self.prefix(i) + f"hc_{kind}_"
        return hc_pre(X, self.w[p + "fn"], self.w[p + "scale"], self.w[p + "base"], self.cfg)

    def sublayer(self, i, kind, X, ids):
        """One hyper-connected sublayer (kind "attn" or "ffn"): X [T, hc, H] -> [T, hc, H]."""
        y, post, comb = self.hc_pre(i, kind, X)
        y = rms_norm(y, self.w[self.prefix(i) + f"{kind}_norm.weight"], self.cfg.eps)
        y = self.attention(i, y) if kind == "attn" else self.moe(i, y, ids)
        return hc_post(y, X, post, comb)

    def streams(self, ids):
        """ids [T] -> X [T, hc, H]: every stream starts as the embedding."""
        h = self.w["embed.weight"][ids]
        return np.repeat(h[:, None, :], self.cfg.hc, axis=1)

    def layer(self, i, X, ids):
        for kind in ("attn", "ffn"):
            X = self.sublayer(i, kind, X, ids)
        return X

    def head(self, X, p=""):
        """X [T, hc, H] -> logits [T, V]: hc_head, the norm and the head (p: the MTP block's)."""
        W = self.w
        y = hc_head(X, W[p + "hc_head_fn"], W[p + "hc_head_scale"], W[p + "hc_head_base"], self.cfg)
        return rms_norm(y, W[p + "norm.weight"], self.cfg.eps) @ W[self.head_name].T

    def last_streams(self, ids):
        """ids [T] -> the decoder's last streams X [T, hc, H], positions 0..T-1."""
        ids = np.asarray(ids, dtype=np.int64)
        X = self.streams(ids)
        for i in range(self.cfg.n_layers):
            X = self.layer(i, X, ids)
        return X

    def forward(self, ids):
        """ids [T] -> logits [T, V] (float64), positions 0..T-1."""
        return self.head(self.last_streams(ids))

    def mtp(self, ids):
        """The MTP block teacher-forced over ids [T] -> logits [T - 1, V]: row i (position i) reads
        the decoder's last streams X_i and the next token ids[i + 1], and predicts ids[i + 2]
        (DeepSeek's MTPBlock: e_proj(enorm(embed)) added to h_proj(hnorm(X)) on every stream, the
        block's layer n_layers, its own hc_head and norm, the shared head)."""
        W, c, p = self.w, self.cfg, "mtp.0."
        ids = np.asarray(ids, dtype=np.int64)
        X, nxt = self.last_streams(ids)[:-1], ids[1:]
        e = rms_norm(W["embed.weight"][nxt], W[p + "enorm.weight"], c.eps) @ W[p + "e_proj.weight"].T
        h = rms_norm(X, W[p + "hnorm.weight"], c.eps) @ W[p + "h_proj.weight"].T      # [T-1, hc, H]
        return self.head(self.layer(c.n_layers, h + e[:, None, :], nxt), p)


# ----------------------------------------------------------------------------------------------
# --self-check: internal consistency of the prefill form
# ----------------------------------------------------------------------------------------------

def compress_incremental(kvp, sc, r, D):
    """compress_pool computed token by token, as a decoder would: a kv_state / score_state buffer
    (with overlap: the previous window in slots [0:r), the current one in [r:2r)) that emits an
    entry whenever position t completes a window."""
    overlap = r == 4
    kv_state = np.zeros((2 * r if overlap else r, kvp.shape[1]))
    score_state = np.full(kv_state.shape, -np.inf)
    out = []
    for t in range(kvp.shape[0]):
        slot = (r if overlap else 0) + t % r
        kv_state[slot], score_state[slot] = kvp[t], sc[t]
        if (t + 1) % r:
            continue
        if overlap:
            kv = np.concatenate([kv_state[:r, :D], kv_state[r:, D:]])
            s = np.concatenate([score_state[:r, :D], score_state[r:, D:]])
            kv_state[:r], score_state[:r] = kv_state[r:].copy(), score_state[r:].copy()
        else:
            kv, s = kv_state, score_state
        out.append(np.sum(softmax(s, axis=0) * kv, axis=0))
    return np.array(out).reshape(-1, D)


def self_check(model, ids):
    """Checks on one prompt; returns (ok, lines)."""
    c = model.cfg
    ids = np.asarray(ids, dtype=np.int64)
    T = len(ids)
    lines, ok = [], True

    def report(name, value, limit):
        nonlocal ok
        good = value <= limit
        ok &= good
        lines.append(f"{'ok  ' if good else 'FAIL'} {name}: {value:.3g} (limit {limit:g})")

    # masks against their definitions, query by query
    bad = 0
    for r in sorted({r for r in c.ratios if r} | {1}):
        win, comp = window_mask(T, c.window), compressed_mask(T, r)
        for s in range(T):
            bad += sorted(np.nonzero(win[s])[0]) != list(range(max(0, s - c.window + 1), s + 1))
            bad += sorted(np.nonzero(comp[s])[0]) != [e for e in range(T // r) if (e + 1) * r - 1 <= s]
    report("visibility masks vs per-query lists, rows wrong", bad, 0)

    # Sinkhorn sums and compressor prefill vs step by step, on every layer's real inputs
    X, sums, pool = model.streams(ids), 0.0, 0.0
    for i in range(c.n_layers):
        for kind in ("attn", "ffn"):
            y, _, comb = model.hc_pre(i, kind, X)
            sums = max(sums, np.abs(comb.sum(axis=1) - 1).max(), np.abs(comb.sum(axis=2) - 1).max())
            r = c.ratios[i]
            if kind == "attn" and r:
                x = rms_norm(y, model.w[f"layers.{i}.attn_norm.weight"], c.eps)
                parts = [(f"layers.{i}.attn.compressor.", r, c.head_dim)]
                if r == 4:
                    parts.append((f"layers.{i}.attn.indexer.compressor.", 4, c.index_dim))
                for p, rr, D in parts:
                    kvp, sc = model.compressor_inputs(p, x, rr)
                    a, b = compress_pool(kvp, sc, rr, D), compress_incremental(kvp, sc, rr, D)
                    pool = max(pool, np.abs(a - b).max(initial=0.0) / max(np.abs(b).max(initial=0.0), 1e-300))
            X = model.sublayer(i, kind, X, ids)
    report("Sinkhorn comb, max |row or column sum - 1|", sums, 1e-4)
    report("compressor prefill vs incremental, max rel diff", pool, 1e-12)

    # causality: the logits at position t of the whole prompt equal those of the prefix 0..t
    full = model.forward(ids)
    scale = np.abs(full).max()
    cuts = sorted({k for k in (1, 3, 4, 5, c.window, c.window + 1, 127, 128, 129, T // 2, T - 1) if 1 <= k < T})
    diff = max(np.abs(model.forward(ids[:k])[-1] - full[k - 1]).max() for k in cuts) / scale
    report(f"prefix logits vs whole prompt at {len(cuts)} cuts, max rel diff", diff, 1e-10)
    report("non-finite logits", float(np.sum(~np.isfinite(full))), 0)
    return ok, lines


# ----------------------------------------------------------------------------------------------

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HuggingFace model directory")
    ap.add_argument("--input", required=True, help='JSON {"prompts": [{"ids": [...]}, ...]}')
    ap.add_argument("--output", help="output JSON (required unless --self-check)")
    ap.add_argument("--max-new-tokens", type=int, default=0, help="greedy tokens per prompt (default 0)")
    ap.add_argument("--mtp", action="store_true",
                    help='also write "mtp_logits": the MTP block teacher-forced over each prompt')
    ap.add_argument("--self-check", action="store_true",
                    help="run internal consistency checks on each prompt; exit 1 on a failure")
    args = ap.parse_args(argv)
    if not args.output and not args.self_check:
        ap.error("--output is required")

    t0 = time.time()
    model = DeepSeekV4(args.model)
    with open(args.input) as f:
        prompts = [[int(t) for t in pr["ids"]] for pr in json.load(f)["prompts"]]
    if any(not ids for ids in prompts):
        raise ValueError("empty prompt")
    status = 0
    if args.self_check:
        for n, ids in enumerate(prompts):
            ok, lines = self_check(model, ids)
            print(f"prompt {n} ({len(ids)} tokens):\n  " + "\n  ".join(lines))
            status |= 0 if ok else 1
    if args.output:
        results = [run_prompt(model, ids, args.max_new_tokens) for ids in prompts]
        if args.mtp:
            for r, ids in zip(results, prompts):
                r["mtp_logits"] = model.mtp(ids).tolist()
        out = {"model": os.path.abspath(args.model), "model_type": model.cfg.model_type,
               "max_new_tokens": args.max_new_tokens, "prompts": results,
               "seconds": round(time.time() - t0, 3)}
        with open(args.output, "w") as f:
            json.dump(out, f)
    return status


if __name__ == "__main__":
    sys.exit(main())
