"""Tiny Qwen3 target and DFlash / DFlash 2 block drafters (PyTorch 1.13, CPU).

RMSNorm and attention are written out by hand (torch 1.13 has neither nn.RMSNorm nor
scaled_dot_product_attention).  Tensor names follow docs/checkpoints.md exactly so that
state_dict() can be exported as-is.
"""
import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        xf = x.float()
        y = xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + self.eps)
        return (y * self.weight.float()).to(x.dtype)


def rope_cos_sin(positions, head_dim, theta):
    """positions: integer tensor of any shape -> cos, sin of shape [..., head_dim] (neox)."""
    inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim))
    ang = positions.to(torch.float64).unsqueeze(-1) * inv
    ang = torch.cat([ang, ang], dim=-1)
    return torch.cos(ang).float(), torch.sin(ang).float()


def apply_rope(x, cos, sin):
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    rot = torch.cat([-x2, x1], dim=-1)
    return (x.float() * cos + rot.float() * sin).to(x.dtype)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(H, nh * hd, bias=False)
        self.k_proj = nn.Linear(H, nkv * hd, bias=False)
        self.v_proj = nn.Linear(H, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, H, bias=False)
        self.q_norm = RMSNorm(hd, cfg["rms_norm_eps"])
        self.k_norm = RMSNorm(hd, cfg["rms_norm_eps"])


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        H, I = cfg["hidden_size"], cfg["intermediate_size"]
        self.gate_proj = nn.Linear(H, I, bias=False)
        self.up_proj = nn.Linear(H, I, bias=False)
        self.down_proj = nn.Linear(I, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


def _attend(q, k, v, mask):
    """q [b,nh,Sq,hd], k/v [b,nkv,Sk,hd], mask bool broadcastable to [b,nh,Sq,Sk] (True = keep)."""
    nh, nkv = q.shape[1], k.shape[1]
    if nh != nkv:
        k = k.repeat_interleave(nh // nkv, dim=1)
        v = v.repeat_interleave(nh // nkv, dim=1)
    s = torch.matmul(q, k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).to(v.dtype)
    return torch.matmul(p, v)


class TargetLayer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)


class Qwen3Inner(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden_size"])
        self.layers = nn.ModuleList([TargetLayer(cfg) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])


class Qwen3Target(nn.Module):
    """Qwen3 decoder with tied embeddings.  forward() supports a KV cache and left padding."""

    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.model = Qwen3Inner(cfg)
        nn.init.normal_(self.model.embed_tokens.weight, std=0.02)
        for n, p in self.named_parameters():
            if p.dim() == 2 and "embed" not in n:
                nn.init.normal_(p, std=0.02)
            if n.endswith("o_proj.weight") or n.endswith("down_proj.weight"):
                nn.init.normal_(p, std=0.02 / math.sqrt(2 * cfg["num_hidden_layers"]))

    def head(self, y):
        return F.linear(y, self.model.embed_tokens.weight)

    def forward(self, ids, positions=None, cache=None, key_valid=None, taps=None):
        """ids [b,S].  positions [b,S] (default arange).  cache: list of (k,v) per layer or None
        (a new list is returned when cache is a list, it is extended in place).
        key_valid: bool [b, Skv_total] marking real (non-pad) keys.  taps: list of layer ids whose
        outputs are returned (concatenated in that order).
        Returns logits [b,S,V], tap features [b,S,len(taps)*H] or None."""
        b, S = ids.shape
        cfg = self.cfg
        if positions is None:
            positions = torch.arange(S).unsqueeze(0).expand(b, S)
        cos, sin = rope_cos_sin(positions, cfg["head_dim"], cfg["rope_theta"])
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        x = self.model.embed_tokens(ids)
        past = 0 if not cache else cache[0][0].shape[2]
        Sk = past + S
        qi = torch.arange(S).unsqueeze(1) + past
        ki = torch.arange(Sk).unsqueeze(0)
        mask = (ki <= qi).unsqueeze(0).unsqueeze(0)
        if key_valid is not None:
            mask = mask & key_valid[:, None, None, :Sk]
        mask = mask | (ki == qi)  # a pad query always sees itself (no all -inf rows)
        feats = []
        for li, L in enumerate(self.model.layers):
            a = L.self_attn
            h = L.input_layernorm(x)
            q = a.q_proj(h).view(b, S, a.nh, a.hd).transpose(1, 2)
            k = a.k_proj(h).view(b, S, a.nkv, a.hd).transpose(1, 2)
            v = a.v_proj(h).view(b, S, a.nkv, a.hd).transpose(1, 2)
            q = apply_rope(a.q_norm(q), cos, sin)
            k = apply_rope(a.k_norm(k), cos, sin)
            if cache is not None:
                if len(cache) > li:
                    k = torch.cat([cache[li][0], k], dim=2)
                    v = torch.cat([cache[li][1], v], dim=2)
                    cache[li] = (k, v)
                else:
                    cache.append((k, v))
            o = _attend(q, k, v, mask).transpose(1, 2).reshape(b, S, a.nh * a.hd)
            x = x + a.o_proj(o)
            x = x + L.mlp(L.post_attention_layernorm(x))
            if taps is not None and li in taps:
                feats.append((li, x))
        y = self.model.norm(x)
        logits = self.head(y)
        f = None
        if taps is not None:
            d = dict(feats)
            f = torch.cat([d[t] for t in taps], dim=-1)
        return logits, f


class DynConv(nn.Module):
    """Two-tap dynamic convolution (docs/checkpoints.md) over the block axis (dim -2)."""

    def __init__(self, H, K, gs):
        super().__init__()
        self.K, self.gs, self.G = K, gs, H // gs
        bk = torch.zeros(2, K, H)
        bk[:, 0, :] = 1.0
        self.base_kernel = nn.Parameter(bk)
        self.kernel_projection = nn.Linear(H, 2 * K * self.G, bias=False)
        nn.init.zeros_(self.kernel_projection.weight)

    def _apply(self, side, kern, z):
        out = None
        for o in range(self.K):
            w = self.base_kernel[side, o].to(z.dtype) + kern[..., side, o, :]
            zs = z if o == 0 else F.pad(z, (0, 0, o, 0))[..., : z.shape[-2], :]
            t = w * zs
            out = t if out is None else out + t
        return out

    def prepare(self, s):
        d = self.kernel_projection(s)
        d = d.view(*s.shape[:-1], 2, self.K, self.G).repeat_interleave(self.gs, dim=-1)
        return self._apply(0, d, s), d

    def finish(self, z, d):
        return self._apply(1, d, z)


class DrafterLayer(nn.Module):
    def __init__(self, cfg, v2):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.self_attn = Attention(cfg)
        self.post_attention_layernorm = RMSNorm(cfg["hidden_size"], cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)
        if v2:
            dc = cfg["dflash_config"]
            self.attention_conv = DynConv(cfg["hidden_size"], dc["conv_kernel_size"], dc["conv_group_size"])
            self.mlp_conv = DynConv(cfg["hidden_size"], dc["conv_kernel_size"], dc["conv_group_size"])


class CandidateSelector(nn.Module):
    def __init__(self, H, V, r):
        super().__init__()
        self.hidden_projection = nn.Linear(H, r, bias=False)
        self.predecessor_codebook = nn.Parameter(torch.randn(V, r) / math.sqrt(r))
        self.successor_codebook = nn.Parameter(torch.zeros(V, r))

    def scores(self, U, C, prev, y):
        """U [...,k] top-k logits, C [...,k] ids, prev [...] predecessor ids, y [...,H]."""
        g = self.hidden_projection(y).float()
        a = self.predecessor_codebook[prev].float()
        bc = self.successor_codebook[C].float()
        return U.float() + ((a * g).unsqueeze(-2) * bc).sum(-1)


class MarkovHead(nn.Module):
    """DSpark's low-rank sequential correction: bias(prev) = markov_w2 . markov_w1[prev], added to the
    logits of block row k with prev = the token at row k-1 (the anchor for row 1).  W2 starts at zero,
    so an untrained head leaves the DFlash logits unchanged."""

    def __init__(self, V, r):
        super().__init__()
        self.markov_w1 = nn.Embedding(V, r)
        self.markov_w2 = nn.Linear(r, V, bias=False)
        nn.init.normal_(self.markov_w1.weight, std=1.0 / math.sqrt(r))
        nn.init.zeros_(self.markov_w2.weight)

    def forward(self, prev):
        return self.markov_w2(self.markov_w1(prev).float())


class DFlashDrafter(nn.Module):
    """DFlashDraftModel (v2=False), DFlash2DraftModel (v2=True) or, with markov_rank > 0, a DSpark
    drafter (the v1 backbone plus MarkovHead).  No embed_tokens, no lm_head."""

    def __init__(self, cfg, v2, markov_rank=0):
        super().__init__()
        self.cfg, self.v2, self.dspark = cfg, v2, markov_rank > 0
        H = cfg["hidden_size"]
        Lt = len(cfg["dflash_config"]["target_layer_ids"])
        self.fc = nn.Linear(Lt * H, H, bias=False)
        self.hidden_norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.layers = nn.ModuleList([DrafterLayer(cfg, v2) for _ in range(cfg["num_hidden_layers"])])
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        for n, p in self.named_parameters():
            if p.dim() == 2 and n.endswith(".weight") and "kernel_projection" not in n and "selector" not in n:
                nn.init.normal_(p, std=0.02)
        if v2:
            dc = cfg["dflash_config"]
            self.candidate_selector = CandidateSelector(H, cfg["vocab_size"], dc["selector_rank"])
        if self.dspark:
            self.markov_head = MarkovHead(cfg["vocab_size"], markov_rank)

    def forward(self, feats, ctx_len, block_emb, anchors, use_conv=True):
        """feats [b,S,Lt*H] target tap features; ctx_len unused placeholder for clarity.
        block_emb [b,N,B,H] embeddings of [x_a, MASK...]; anchors [b,N] positions.
        Block row t of anchor a attends to context p < a and to all B rows of its own block.
        Returns normed hidden y [b,N,B,H]."""
        cfg = self.cfg
        b, S, _ = feats.shape
        _, N, B, H = block_emb.shape
        u = self.hidden_norm(self.fc(feats))
        cpos = torch.arange(S).unsqueeze(0).expand(b, S)
        ccos, csin = rope_cos_sin(cpos, cfg["head_dim"], cfg["rope_theta"])
        ccos, csin = ccos.unsqueeze(1), csin.unsqueeze(1)  # [b,1,S,hd]
        bpos = anchors.unsqueeze(-1) + torch.arange(B)  # [b,N,B]
        bcos, bsin = rope_cos_sin(bpos, cfg["head_dim"], cfg["rope_theta"])
        bcos, bsin = bcos.unsqueeze(1), bsin.unsqueeze(1)  # [b,1,N,B,hd]
        cmask = (torch.arange(S).view(1, 1, S) < anchors.unsqueeze(-1))  # [b,N,S]
        cmask = cmask[:, None, :, None, :]  # [b,1,N,1,S]
        x = block_emb
        for L in self.layers:
            a = L.self_attn
            nh, nkv, hd = a.nh, a.nkv, a.hd
            kc = apply_rope(a.k_norm(a.k_proj(u).view(b, S, nkv, hd).transpose(1, 2)), ccos, csin)
            vc = a.v_proj(u).view(b, S, nkv, hd).transpose(1, 2)
            rep = nh // nkv
            kc = kc.repeat_interleave(rep, 1)
            vc = vc.repeat_interleave(rep, 1)
            h = L.input_layernorm(x)
            conv = self.v2 and use_conv
            if conv:
                h, dA = L.attention_conv.prepare(h)
            q = a.q_proj(h).view(b, N, B, nh, hd).permute(0, 3, 1, 2, 4)
            kb = a.k_proj(h).view(b, N, B, nkv, hd).permute(0, 3, 1, 2, 4)
            vb = a.v_proj(h).view(b, N, B, nkv, hd).permute(0, 3, 1, 2, 4)
            q = apply_rope(a.q_norm(q), bcos, bsin)
            kb = apply_rope(a.k_norm(kb), bcos, bsin).repeat_interleave(rep, 1)
            vb = vb.repeat_interleave(rep, 1)
            sc = torch.einsum("bhnqd,bhkd->bhnqk", q, kc).float()
            sb = torch.einsum("bhnqd,bhnkd->bhnqk", q, kb).float()
            sc = sc.masked_fill(~cmask, float("-inf"))
            s = torch.cat([sc, sb], dim=-1) / math.sqrt(hd)
            p = torch.softmax(s, dim=-1).to(vc.dtype)
            o = torch.einsum("bhnqk,bhkd->bhnqd", p[..., :S], vc) + torch.einsum("bhnqk,bhnkd->bhnqd", p[..., S:], vb)
            o = a.o_proj(o.permute(0, 2, 3, 1, 4).reshape(b, N, B, nh * hd))
            if conv:
                o = L.attention_conv.finish(o, dA)
            x = x + o
            m = L.post_attention_layernorm(x)
            if conv:
                m, dM = L.mlp_conv.prepare(m)
            z = L.mlp(m)
            if conv:
                z = L.mlp_conv.finish(z, dM)
            x = x + z
        return self.norm(x)

    def logits(self, y, head_weight):
        dc = self.cfg["dflash_config"]
        l = F.linear(y, head_weight).float() * dc.get("output_multiplier", 1.0)
        c = dc.get("final_logit_softcapping")
        if c:
            l = torch.tanh(l / c) * c
        return l


def count_params(m):
    return sum(p.numel() for p in m.parameters())
