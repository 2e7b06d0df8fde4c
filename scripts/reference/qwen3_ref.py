"""Independent float32 PyTorch reference of the target model (docs/checkpoints.md): Qwen3 / LLaMA.

API:
    cfg = TargetConfig.from_dict(config_json_dict)
        hidden_size, intermediate_size, num_hidden_layers, num_attention_heads,
        num_key_value_heads, head_dim (default hidden/heads), rms_norm_eps,
        rope_theta (top-level or rope_parameters.rope_theta; rope_type must be
        "default" or absent), vocab_size, tie_word_embeddings, max_position_embeddings,
        model_type ("qwen3" => q/k norm, else none), eos_token_ids (list).
    target = Target.from_dir(path)          # HF directory (safetensors_io.load_hf_dir)
    target = Target(cfg, tensors)           # tensors: dict name -> tensor (any float dtype)
    cache = target.new_cache()              # per-layer K/V, shape [nkv, T, hd]
    logits, taps = target.forward(ids, cache=None, start_pos=None, tap_layers=())
        ids: list[int] or 1-D LongTensor of n new tokens, placed at positions
        start_pos .. start_pos+n-1 (start_pos defaults to cache.length, 0 without cache).
        Returns logits [n, V] (float32) and taps [n, len(tap_layers)*H]: the concat,
        in the given order, of the residual stream AFTER decoder layer i (before the
        final norm) for every new position.  With a cache, new K/V are appended.
    cache.truncate(n)                       # keep the first n positions
    target.embed(ids) -> [n, H];  target.lm_head(y) -> [.., V]  (used by the drafter)
    greedy_generate(target, prompt, n) -> list of generated ids (stops after EOS)

Everything is computed in float32 (BF16/F16 weights are upcast once at load).
"""
import math

import torch

from safetensors_io import load_hf_dir


def rms_norm(x, w, eps):
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_tables(positions, hd, theta):
    """cos/sin of shape [n, hd] for neox-style RoPE (halves rotated)."""
    i = torch.arange(0, hd // 2, dtype=torch.float64)
    inv_freq = theta ** (-2.0 * i / hd)
    ang = torch.as_tensor(positions, dtype=torch.float64)[:, None] * inv_freq[None, :]
    ang = torch.cat([ang, ang], dim=-1)
    return ang.cos().float(), ang.sin().float()


def apply_rope(x, positions, theta):
    """x: [heads, n, hd]; positions: list/tensor of n absolute positions."""
    hd = x.shape[-1]
    cos, sin = rope_tables(positions, hd, theta)
    x1, x2 = x[..., : hd // 2], x[..., hd // 2:]
    rot = torch.cat([-x2, x1], dim=-1)
    return x * cos + rot * sin


def parse_rope_theta(cfg, default=10000.0):
    rp = cfg.get("rope_parameters") or cfg.get("rope_scaling")
    if isinstance(rp, dict):
        rt = rp.get("rope_type", rp.get("type", "default"))
        if rt not in ("default", None):
            raise ValueError(f"unsupported rope_type {rt!r} (only 'default' is implemented)")
        if "rope_theta" in rp:
            return float(rp["rope_theta"])
    return float(cfg.get("rope_theta", default))


class TargetConfig:
    @classmethod
    def from_dict(cls, d):
        c = cls()
        c.raw = d
        c.hidden_size = int(d["hidden_size"])
        c.intermediate_size = int(d["intermediate_size"])
        c.num_hidden_layers = int(d["num_hidden_layers"])
        c.num_attention_heads = int(d["num_attention_heads"])
        c.num_key_value_heads = int(d.get("num_key_value_heads", c.num_attention_heads))
        c.head_dim = int(d.get("head_dim") or c.hidden_size // c.num_attention_heads)
        c.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        c.rope_theta = parse_rope_theta(d)
        c.vocab_size = int(d["vocab_size"])
        c.tie_word_embeddings = bool(d.get("tie_word_embeddings", False))
        c.max_position_embeddings = int(d.get("max_position_embeddings", 4096))
        c.model_type = d.get("model_type", "qwen3")
        eos = d.get("eos_token_id")
        c.eos_token_ids = [] if eos is None else (list(eos) if isinstance(eos, list) else [int(eos)])
        return c


class KVCache:
    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers

    @property
    def length(self):
        return 0 if self.k[0] is None else self.k[0].shape[1]

    def append(self, i, k, v):
        self.k[i] = k if self.k[i] is None else torch.cat([self.k[i], k], dim=1)
        self.v[i] = v if self.v[i] is None else torch.cat([self.v[i], v], dim=1)
        return self.k[i], self.v[i]

    def truncate(self, n):
        for i in range(len(self.k)):
            if self.k[i] is not None:
                self.k[i] = self.k[i][:, :n]
                self.v[i] = self.v[i][:, :n]


def _get(tensors, name, shape=None):
    for cand in (name, "model." + name):
        if cand in tensors:
            t = tensors[cand].float()
            if shape is not None and list(t.shape) != list(shape):
                raise ValueError(f"{cand}: shape {list(t.shape)} != expected {list(shape)}")
            return t
    raise KeyError(f"missing tensor {name}")


def attention(q, k, v, mask):
    """q [nh, n, hd], k/v [nkv, T, hd], mask [n, T] bool (True = allowed). GQA."""
    nh, nkv, hd = q.shape[0], k.shape[0], q.shape[-1]
    rep = nh // nkv
    k = k.repeat_interleave(rep, dim=0)
    v = v.repeat_interleave(rep, dim=0)
    s = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
    s = s.masked_fill(~mask[None], float("-inf"))
    return torch.softmax(s, dim=-1) @ v


class Target:
    def __init__(self, cfg, tensors):
        if isinstance(cfg, dict):
            cfg = TargetConfig.from_dict(cfg)
        self.cfg = c = cfg
        H, I, V = c.hidden_size, c.intermediate_size, c.vocab_size
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        self.qk_norm = c.model_type == "qwen3"
        self.embed_w = _get(tensors, "embed_tokens.weight", [V, H])
        if c.tie_word_embeddings or not any(k in tensors for k in ("lm_head.weight", "model.lm_head.weight")):
            self.head_w = self.embed_w
        else:
            self.head_w = _get(tensors, "lm_head.weight", [V, H])
        self.norm_w = _get(tensors, "norm.weight", [H])
        self.layers = []
        for i in range(c.num_hidden_layers):
            p = f"layers.{i}."
            L = {
                "in": _get(tensors, p + "input_layernorm.weight", [H]),
                "post": _get(tensors, p + "post_attention_layernorm.weight", [H]),
                "q": _get(tensors, p + "self_attn.q_proj.weight", [nh * hd, H]),
                "k": _get(tensors, p + "self_attn.k_proj.weight", [nkv * hd, H]),
                "v": _get(tensors, p + "self_attn.v_proj.weight", [nkv * hd, H]),
                "o": _get(tensors, p + "self_attn.o_proj.weight", [H, nh * hd]),
                "gate": _get(tensors, p + "mlp.gate_proj.weight", [I, H]),
                "up": _get(tensors, p + "mlp.up_proj.weight", [I, H]),
                "down": _get(tensors, p + "mlp.down_proj.weight", [H, I]),
            }
            if self.qk_norm:
                L["qn"] = _get(tensors, p + "self_attn.q_norm.weight", [hd])
                L["kn"] = _get(tensors, p + "self_attn.k_norm.weight", [hd])
            self.layers.append(L)

    @classmethod
    def from_dir(cls, path):
        cfg, tensors = load_hf_dir(path)
        return cls(TargetConfig.from_dict(cfg), tensors)

    def new_cache(self):
        return KVCache(self.cfg.num_hidden_layers)

    def embed(self, ids):
        return self.embed_w[torch.as_tensor(ids, dtype=torch.long)]

    def lm_head(self, y):
        return y @ self.head_w.t()

    def forward(self, ids, cache=None, start_pos=None, tap_layers=()):
        c = self.cfg
        nh, nkv, hd, eps = c.num_attention_heads, c.num_key_value_heads, c.head_dim, c.rms_norm_eps
        ids = torch.as_tensor(ids, dtype=torch.long).reshape(-1)
        n = ids.numel()
        if start_pos is None:
            start_pos = cache.length if cache is not None else 0
        if cache is not None and cache.length != start_pos:
            raise ValueError(f"cache length {cache.length} != start_pos {start_pos}")
        pos = list(range(start_pos, start_pos + n))
        x = self.embed(ids)
        outs = {}
        for i, L in enumerate(self.layers):
            h = rms_norm(x, L["in"], eps)
            q = (h @ L["q"].t()).view(n, nh, hd).transpose(0, 1)
            k = (h @ L["k"].t()).view(n, nkv, hd).transpose(0, 1)
            v = (h @ L["v"].t()).view(n, nkv, hd).transpose(0, 1)
            if self.qk_norm:
                q = rms_norm(q, L["qn"], eps)
                k = rms_norm(k, L["kn"], eps)
            q = apply_rope(q, pos, c.rope_theta)
            k = apply_rope(k, pos, c.rope_theta)
            if cache is not None:
                k, v = cache.append(i, k, v)
            T = k.shape[1]
            kpos = torch.arange(T) + (start_pos + n - T)
            mask = kpos[None, :] <= torch.tensor(pos)[:, None]
            a = attention(q, k, v, mask).transpose(0, 1).reshape(n, nh * hd)
            x = x + a @ L["o"].t()
            m = rms_norm(x, L["post"], eps)
            x = x + (torch.nn.functional.silu(m @ L["gate"].t()) * (m @ L["up"].t())) @ L["down"].t()
            if i in tap_layers:
                outs[i] = x
        y = rms_norm(x, self.norm_w, eps)
        logits = self.lm_head(y)
        taps = torch.cat([outs[i] for i in tap_layers], dim=-1) if tap_layers else None
        return logits, taps


def argmax_smallest(v):
    """argmax with ties resolved to the smaller index."""
    m = v.max()
    return int(torch.nonzero(v == m)[0, 0])


def greedy_generate(target, prompt, n):
    cache = target.new_cache()
    logits, _ = target.forward(prompt, cache)
    out = []
    margins = []
    eos = set(target.cfg.eos_token_ids)
    while len(out) < n:
        row = logits[-1]
        top2 = torch.topk(row, 2).values
        margins.append(float(top2[0] - top2[1]))
        t = argmax_smallest(row)
        out.append(t)
        if t in eos or len(out) >= n:
            break
        logits, _ = target.forward([t], cache)
    return out, margins
