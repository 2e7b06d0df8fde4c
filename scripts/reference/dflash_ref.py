"""Independent float32 PyTorch reference of the DFlash / DFlash 2 drafter (docs/checkpoints.md; variants: README).

API:
    dcfg = DrafterConfig.from_dict(config_json_dict, target_num_layers=None)
        .version (1 or 2), .block_size, .mask_token_id, .target_layer_ids (default formula
        when absent: n = drafter layers, N = num_target_layers; n == 1 -> [N // 2], else
        floor(1 + i*(N-4)/(n-1) + 0.5)), .layer_types, .sliding_window, .is_causal,
        .output_multiplier (1.0), .final_logit_softcapping (None), .conv_kernel_size,
        .conv_group_size, .selector_rank, .selector_top_k.
    drafter = Drafter.from_dir(path, target)      # target: qwen3_ref.Target (embedding + head)
    drafter.check_variant(variant)                # ValueError naming missing tensors
    ctx = drafter.new_context()                   # persistent per-request context K/V
    drafter.add_context(ctx, features, positions) # features [n, Lt*H_target] (Target.forward taps,
                                                  # tap_layers = dcfg.target_layer_ids), projected once
    out = drafter.draft_block(ctx, anchor, P, B, variant)
        Runs the block [anchor, MASK x (B-1)] at positions P..P+B-1 (B <= trained block_size is
        fine: it is just B rows).  Returns dict:
          "logits": [B-1, V] rows 1..B-1 (x output_multiplier, then softcap),
          "g":      [B-1, r] selector hidden projection of the final-normed rows (None w/o selector)
    picks, info = drafter.select(out, anchor, variant, temperature=0, top_p=1, top_k=0, generator=None)
        temperature == 0: greedy.  Selector on (variants conv-off, dflash2): walk from prev=anchor,
        S_t(j) = U_t[j] + sum_r A[prev,r] g_t[r] Bc[C_t[j],r] over the selector_top_k candidates
        (U, C) of row t's logits; pick argmax S (ties -> smaller token id).  Selector off: argmax of
        row logits (ties -> smaller id).
        temperature > 0: selector on draws from softmax(S_t / T) over its candidates, selector off from
        softmax(logits_t / T); in both cases top-k then top-p filtering is applied to the scaled
        scores exactly as on the target side (see filtered_probs).  info["q"] is a [B-1, V] tensor of
        the distributions actually sampled from (zeros outside the candidates); info["candidates"] the
        selector's candidate ids per row; info["margins"] top1-top2 gaps of the row logits (and of S
        and of the k-th/k+1-th logits when the selector is on) -- for tie checks.
    topk_desc(v, k) -> ids sorted by value desc, ties -> smaller id
    filtered_probs(scores, temperature, top_p, top_k) -> probability vector over len(scores)
        (scores / T; keep the top_k largest (0 = all; ties -> smaller id); then keep, in descending
        order, each token whose preceding cumulative probability is < top_p; renormalise).

Variants: "dflash" (selector off, conv = identity), "selector-off" (conv on), "conv-off" (selector on,
conv = identity), "dflash2" (both on), "dspark" (a DSpark checkpoint: the DFlash 1 block, then the
sequential Markov walk below).  "ar" has no drafter.

DSpark (docs/checkpoints.md, "DSpark drafter"): config architectures DSparkDraftModel (aliases
Qwen3DSparkModel, DSparkSpeculator), optional draft_vocab_size Vd (default V) and
markov_head_type "vanilla".  Tensors markov_head.markov_w1.weight W1 [V, R] (rows by target id),
markov_head.markov_w2.weight W2 [Vd, R], optional markov_head.markov_w2.scale s [1] (default 1),
d2t [Vd] ints (draft id i -> target id i + d2t[i]), lm_head.weight [Vd, H] (own head; else the
target's), confidence_head.proj.weight [1, H + R] / .bias [1] (checked, unused).
    draft_block logits of a DSpark drafter: [B-1, V] with the Vd draft logits scattered to their
        target ids, -inf at every other id.
    drafter.markov_bias(prev) -> [V]: s * W2 . W1[prev] scattered like the logits (0 elsewhere).
    select(..., "dspark"): prev = anchor; per row t: z_t = logits_t + markov_bias(prev); pick = argmax
        z_t (ties -> smaller id) or a draw from filtered_probs(z_t); prev = pick.
        info["corrected"] = the z rows [B-1, V]; info["q"] = the filtered z distributions.
"""
import math

import torch

from qwen3_ref import _get, apply_rope, attention, parse_rope_theta, rms_norm, argmax_smallest
from safetensors_io import load_hf_dir

VARIANTS = ("ar", "dflash", "selector-off", "conv-off", "dflash2", "dspark")
USES_SELECTOR = {"dflash": False, "selector-off": False, "conv-off": True, "dflash2": True, "dspark": False}
USES_CONV = {"dflash": False, "selector-off": True, "conv-off": False, "dflash2": True, "dspark": False}
DSPARK_ARCHS = ("DSparkDraftModel", "Qwen3DSparkModel", "DSparkSpeculator")


def default_target_layer_ids(N, n):
    if n == 1:
        return [N // 2]
    return [int(math.floor(1 + i * (N - 4) / (n - 1) + 0.5)) for i in range(n)]


class DrafterConfig:
    @classmethod
    def from_dict(cls, d, target_num_layers=None):
        c = cls()
        c.raw = d
        dc = d.get("dflash_config") or {}
        archs = d.get("architectures") or []
        c.version = 2 if "DFlash2DraftModel" in archs else 1
        c.dspark = any(a in archs for a in DSPARK_ARCHS)
        if c.dspark and d.get("markov_head_type", "vanilla") not in (None, "vanilla"):
            raise ValueError(f"markov_head_type {d['markov_head_type']!r} (only 'vanilla')")
        c.hidden_size = int(d["hidden_size"])
        c.intermediate_size = int(d["intermediate_size"])
        c.num_hidden_layers = int(d["num_hidden_layers"])
        c.num_attention_heads = int(d["num_attention_heads"])
        c.num_key_value_heads = int(d.get("num_key_value_heads", c.num_attention_heads))
        c.head_dim = int(d.get("head_dim") or c.hidden_size // c.num_attention_heads)
        c.rms_norm_eps = float(d.get("rms_norm_eps", 1e-6))
        c.rope_theta = parse_rope_theta(d)
        c.vocab_size = int(d["vocab_size"])
        c.draft_vocab_size = int(d.get("draft_vocab_size") or c.vocab_size)
        c.block_size = int(d.get("block_size", dc.get("block_size", 16)))
        c.num_target_layers = int(d.get("num_target_layers", target_num_layers or 0))
        if "mask_token_id" not in dc and "mask_token_id" not in d:
            raise ValueError("drafter config lacks dflash_config.mask_token_id")
        c.mask_token_id = int(dc.get("mask_token_id", d.get("mask_token_id")))
        tl = dc.get("target_layer_ids", d.get("target_layer_ids"))
        c.target_layer_ids = list(tl) if tl is not None else default_target_layer_ids(
            c.num_target_layers, c.num_hidden_layers)
        c.layer_types = d.get("layer_types") or ["full_attention"] * c.num_hidden_layers
        c.sliding_window = d.get("sliding_window")
        c.is_causal = bool(d.get("is_causal", True))
        c.output_multiplier = float(dc.get("output_multiplier", 1.0) or 1.0)
        sc = dc.get("final_logit_softcapping")
        c.final_logit_softcapping = float(sc) if sc else None
        c.conv_kernel_size = int(dc.get("conv_kernel_size", 2))
        c.conv_group_size = int(dc.get("conv_group_size", 16))
        c.selector_rank = int(dc.get("selector_rank", 0) or 0)
        c.selector_top_k = int(dc.get("selector_top_k", 0) or 0)
        return c


class DraftContext:
    def __init__(self, n_layers):
        self.k = [None] * n_layers
        self.v = [None] * n_layers
        self.pos = torch.zeros(0, dtype=torch.long)

    @property
    def length(self):
        return int(self.pos.numel())


def topk_desc(v, k):
    """Top-k ids of a 1-D tensor, value descending, ties -> smaller id (stable sort)."""
    order = sorted(range(v.numel()), key=lambda j: (-float(v[j]), j))
    return order[:k]


def filtered_probs(scores, temperature, top_p=1.0, top_k=0):
    s = scores.double() / temperature
    n = s.numel()
    order = topk_desc(s, n)
    keep = order[:top_k] if top_k and top_k > 0 else order
    sk = s[keep]
    p = torch.softmax(sk, dim=0)
    if top_p < 1.0:
        cum = 0.0
        m = 0
        for j in range(len(keep)):
            if cum < top_p:
                m += 1
                cum += float(p[j])
            else:
                break
        keep = keep[:m]
        p = torch.softmax(sk[:m], dim=0)
    out = torch.zeros(n, dtype=torch.float64)
    out[torch.tensor(keep)] = p
    return out


def sample_from(p, generator):
    """Inverse-CDF draw from a probability vector (float64)."""
    u = float(torch.rand((), generator=generator, dtype=torch.float64))
    c = torch.cumsum(p, 0)
    idx = int(torch.searchsorted(c, torch.tensor([u * float(c[-1])], dtype=torch.float64), right=True)[0])
    idx = min(idx, p.numel() - 1)
    while p[idx] <= 0:  # guard against landing on a zero-probability tail entry
        idx -= 1
    return idx


class Drafter:
    def __init__(self, cfg, tensors, target):
        if isinstance(cfg, dict):
            cfg = DrafterConfig.from_dict(cfg, target.cfg.num_hidden_layers)
        self.cfg = c = cfg
        self.target = target
        H, I = c.hidden_size, c.intermediate_size
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        Ht = target.cfg.hidden_size
        if c.vocab_size != target.cfg.vocab_size:
            raise ValueError("drafter vocab_size != target vocab_size")
        for t in c.target_layer_ids:
            if not 0 <= t < target.cfg.num_hidden_layers:
                raise ValueError(f"target layer id {t} out of range")
        self.tensor_names = set(k[6:] if k.startswith("model.") else k for k in tensors)
        self.fc = _get(tensors, "fc.weight", [H, len(c.target_layer_ids) * Ht])
        self.hidden_norm = _get(tensors, "hidden_norm.weight", [H])
        self.norm_w = _get(tensors, "norm.weight", [H])
        K = c.conv_kernel_size
        G = H // c.conv_group_size if c.conv_group_size else 0
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
            if p + "self_attn.q_norm.weight" in self.tensor_names:
                L["qn"] = _get(tensors, p + "self_attn.q_norm.weight", [hd])
                L["kn"] = _get(tensors, p + "self_attn.k_norm.weight", [hd])
            for cv in ("attention_conv", "mlp_conv"):
                if p + cv + ".base_kernel" in self.tensor_names:
                    L[cv] = (_get(tensors, p + cv + ".base_kernel", [2, K, H]),
                             _get(tensors, p + cv + ".kernel_projection.weight", [2 * K * G, H]))
            self.layers.append(L)
        self.selector = None
        if "candidate_selector.hidden_projection.weight" in self.tensor_names:
            r, V = c.selector_rank, c.vocab_size
            self.selector = (
                _get(tensors, "candidate_selector.hidden_projection.weight", [r, H]),
                _get(tensors, "candidate_selector.predecessor_codebook", [V, r]),
                _get(tensors, "candidate_selector.successor_codebook", [V, r]),
            )

        self.markov = None
        if c.dspark:
            V, Vd = c.vocab_size, c.draft_vocab_size
            w1 = _get(tensors, "markov_head.markov_w1.weight")
            R = w1.shape[1]
            if list(w1.shape) != [V, R]:
                raise ValueError(f"markov_w1 shape {list(w1.shape)} != [{V}, R]")
            w2 = _get(tensors, "markov_head.markov_w2.weight", [Vd, R])
            scale = 1.0
            if "markov_head.markov_w2.scale" in self.tensor_names:
                scale = float(_get(tensors, "markov_head.markov_w2.scale").reshape(-1)[0])
            d2t = torch.arange(Vd)
            for nm in ("d2t", "model.d2t"):
                if nm in tensors:
                    d2t = torch.arange(Vd) + tensors[nm].long().reshape(-1)
            if Vd < V and "d2t" not in self.tensor_names:
                raise ValueError("draft_vocab_size < vocab_size needs d2t")
            if sorted(set(d2t.tolist())) != sorted(d2t.tolist()) or min(d2t.tolist()) < 0 or max(d2t.tolist()) >= V:
                raise ValueError("d2t maps outside the vocabulary or twice to one id")
            head = _get(tensors, "lm_head.weight", [Vd, H]) if "lm_head.weight" in self.tensor_names else None
            if head is None and Vd < V:
                raise ValueError("draft_vocab_size < vocab_size needs lm_head.weight")
            if "confidence_head.proj.weight" in self.tensor_names:
                _get(tensors, "confidence_head.proj.weight", [1, H + R])
                _get(tensors, "confidence_head.proj.bias", [1])
            self.markov = {"w1": w1, "w2": w2, "scale": scale, "d2t": d2t, "head": head, "rank": R}

    def markov_bias(self, prev):
        """[V] float32: s * W2 . W1[prev] at the mapped target ids, 0 elsewhere."""
        m = self.markov
        out = torch.zeros(self.cfg.vocab_size)
        out[m["d2t"]] = m["scale"] * (m["w2"] @ m["w1"][prev])
        return out

    @classmethod
    def from_dir(cls, path, target):
        cfg, tensors = load_hf_dir(path)
        return cls(DrafterConfig.from_dict(cfg, target.cfg.num_hidden_layers), tensors, target)

    def check_variant(self, variant):
        if variant not in USES_SELECTOR:
            raise ValueError(f"unknown drafter variant {variant!r}")
        if (variant == "dspark") != self.cfg.dspark and not (self.cfg.dspark and variant == "dflash"):
            raise ValueError(f"variant {variant!r} and checkpoint kind (dspark: {self.cfg.dspark}) differ")
        missing = []
        if USES_CONV[variant]:
            for i in range(self.cfg.num_hidden_layers):
                for cv in ("attention_conv", "mlp_conv"):
                    for t in (".base_kernel", ".kernel_projection.weight"):
                        if f"layers.{i}.{cv}{t}" not in self.tensor_names:
                            missing.append(f"layers.{i}.{cv}{t}")
        if USES_SELECTOR[variant]:
            for t in ("hidden_projection.weight", "predecessor_codebook", "successor_codebook"):
                if "candidate_selector." + t not in self.tensor_names:
                    missing.append("candidate_selector." + t)
            if self.cfg.selector_top_k <= 0:
                missing.append("dflash_config.selector_top_k")
        if missing:
            raise ValueError(f"variant {variant!r} needs missing tensors: {', '.join(missing)}")

    def new_context(self):
        return DraftContext(self.cfg.num_hidden_layers)

    def _qk_heads(self, L, h, pos):
        c = self.cfg
        n = h.shape[0]
        k = (h @ L["k"].t()).view(n, c.num_key_value_heads, c.head_dim).transpose(0, 1)
        v = (h @ L["v"].t()).view(n, c.num_key_value_heads, c.head_dim).transpose(0, 1)
        if "kn" in L:
            k = rms_norm(k, L["kn"], c.rms_norm_eps)
        k = apply_rope(k, pos, c.rope_theta)
        return k, v

    def add_context(self, ctx, features, positions):
        c = self.cfg
        features = features.float()
        positions = torch.as_tensor(positions, dtype=torch.long).reshape(-1)
        u = rms_norm(features @ self.fc.t(), self.hidden_norm, c.rms_norm_eps)
        for i, L in enumerate(self.layers):
            k, v = self._qk_heads(L, u, positions.tolist())
            ctx.k[i] = k if ctx.k[i] is None else torch.cat([ctx.k[i], k], 1)
            ctx.v[i] = v if ctx.v[i] is None else torch.cat([ctx.v[i], v], 1)
        ctx.pos = torch.cat([ctx.pos, positions])

    def _conv(self, s, z, conv, which):
        """which 0 = prepare (z is s), 1 = finish.  s drives delta; z is convolved."""
        base, kp = conv
        c = self.cfg
        B, H = s.shape
        K, gs = c.conv_kernel_size, c.conv_group_size
        G = H // gs
        delta = (s @ kp.t()).view(B, 2, K, G)
        grp = torch.arange(H) // gs
        out = torch.zeros_like(z)
        for t in range(B):
            for o in range(K):
                if t - o < 0:
                    continue
                w = base[which, o, :] + delta[t, which, o, grp]
                out[t] += w * z[t - o]
        return out

    def draft_block(self, ctx, anchor, P, B, variant):
        c = self.cfg
        self.check_variant(variant)
        use_conv = USES_CONV[variant]
        nh, hd, eps = c.num_attention_heads, c.head_dim, c.rms_norm_eps
        ids = [anchor] + [c.mask_token_id] * (B - 1)
        pos = list(range(P, P + B))
        x = self.target.embed(ids)
        qpos = torch.tensor(pos)
        for i, L in enumerate(self.layers):
            s = rms_norm(x, L["in"], eps)
            si = self._conv(s, s, L["attention_conv"], 0) if use_conv else s
            q = (si @ L["q"].t()).view(B, nh, hd).transpose(0, 1)
            if "qn" in L:
                q = rms_norm(q, L["qn"], eps)
            q = apply_rope(q, pos, c.rope_theta)
            kb, vb = self._qk_heads(L, si, pos)
            if ctx.k[i] is not None:
                k = torch.cat([ctx.k[i], kb], 1)
                v = torch.cat([ctx.v[i], vb], 1)
                kpos = torch.cat([ctx.pos, qpos])
            else:
                k, v, kpos = kb, vb, qpos
            mask = torch.ones(B, kpos.numel(), dtype=torch.bool)
            if c.layer_types[i] == "sliding_attention":
                W = int(c.sliding_window)
                mask &= (qpos[:, None] - kpos[None, :]).abs() < W
                if c.is_causal:
                    mask &= kpos[None, :] <= qpos[:, None]
            a = attention(q, k, v, mask).transpose(0, 1).reshape(B, nh * hd) @ L["o"].t()
            if use_conv:
                a = self._conv(s, a, L["attention_conv"], 1)
            x = x + a
            m = rms_norm(x, L["post"], eps)
            mi = self._conv(m, m, L["mlp_conv"], 0) if use_conv else m
            z = (torch.nn.functional.silu(mi @ L["gate"].t()) * (mi @ L["up"].t())) @ L["down"].t()
            if use_conv:
                z = self._conv(m, z, L["mlp_conv"], 1)
            x = x + z
        y = rms_norm(x, self.norm_w, eps)[1:]
        own = self.markov is not None and self.markov["head"] is not None
        logits = (y @ self.markov["head"].t() if own else self.target.lm_head(y)) * c.output_multiplier
        if c.final_logit_softcapping:
            sc = c.final_logit_softcapping
            logits = torch.tanh(logits / sc) * sc
        if own:  # draft ids -> target ids, -inf at the ids the draft vocabulary lacks
            full = torch.full((B - 1, c.vocab_size), float("-inf"))
            full[:, self.markov["d2t"]] = logits
            logits = full
        g = y @ self.selector[0].t() if (self.selector is not None and USES_SELECTOR[variant]) else None
        return {"logits": logits, "g": g}

    def select(self, out, anchor, variant, temperature=0.0, top_p=1.0, top_k=0, generator=None):
        logits, g = out["logits"], out["g"]
        n, V = logits.shape
        picks = []
        qs = torch.zeros(n, V, dtype=torch.float64)
        cands = []
        prev = anchor
        margins = []
        corrected = []
        for t in range(n):
            row = logits[t]
            if variant == "dspark":
                row = row + self.markov_bias(prev)
                corrected.append(row)
            srt = torch.sort(row, descending=True).values
            margins.append(float(srt[0] - srt[1]))
            if USES_SELECTOR[variant]:
                k = self.cfg.selector_top_k
                C = topk_desc(row, k)
                U = row[C]
                _, A, Bc = self.selector
                S = U + (Bc[C] * (A[prev] * g[t])[None, :]).sum(-1)
                cands.append(C)
                if k < V:
                    margins.append(float(srt[k - 1] - srt[k]))
                if k > 1:
                    s2 = torch.sort(S, descending=True).values
                    margins.append(float(s2[0] - s2[1]))
                if temperature <= 0:
                    j = argmax_smallest_id(S, C)
                    pick = C[j]
                else:
                    p = filtered_probs(S, temperature, top_p, top_k)
                    qs[t, torch.tensor(C)] = p
                    pick = C[sample_from(p, generator)]
            else:
                if temperature <= 0:
                    pick = argmax_smallest(row)
                else:
                    p = filtered_probs(row, temperature, top_p, top_k)
                    qs[t] = p
                    pick = sample_from(p, generator)
            picks.append(pick)
            prev = pick
        info = {"q": qs, "candidates": cands, "margins": margins}
        if variant == "dspark":
            info["corrected"] = torch.stack(corrected)
        return picks, info


def argmax_smallest_id(S, C):
    """Index j of the max of S; ties -> the candidate with the smaller token id C[j]."""
    m = S.max()
    js = [j for j in range(len(C)) if S[j] == m]
    return min(js, key=lambda j: C[j])
