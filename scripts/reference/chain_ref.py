"""Independent float32 PyTorch reference of the autoregressive (chain) drafters: EAGLE-3 and MTP
(docs/checkpoints.md, "EAGLE-3 drafter" and "MTP head"; variants `eagle3`, `mtp`: README).

API:
    ccfg = ChainConfig.from_dict(config_json_dict, target_num_layers)
        .kind ("eagle3" | "mtp"), the shapes of the drafter's one decoder layer, .draft_vocab_size,
        .target_hidden_size, .norm_before_residual (eagle3), .target_layer_ids (the taps, in the
        target reference's convention: the residual stream AFTER decoder layer i), .aux_ids (as
        written), .aux_convention ("output" | "input"), .mtp_feedback ("pre_norm" | "post_norm";
        None: by the layout).
    drafter = ChainDrafter.from_dir(path, target)    # target: qwen3_ref.Target
    ctx = drafter.new_context()
    drafter.add_context(ctx, features, tokens, positions)
        features [n, T*Ht]: Target.forward taps with tap_layers = ccfg.target_layer_ids; tokens: the
        token AT each position (the row's own token).  The drafter's row at position p reads the
        token at p + 1, so a row is turned into K/V when the next row's token arrives; the last row
        given waits (ctx.pending) for the anchor of the next draft.
    picks, info = drafter.draft_chain(ctx, anchor, B, temperature=0, top_p=1, top_k=0, generator=None)
        B-1 sequential steps.  Step 1 is the pending row (position P-1, the last context row) with
        token = anchor (at P); its K/V is committed to ctx.  Step k >= 2 is the row at P+k-2 with
        token = pick k-1 and the fed-back hidden of step k-1; its K/V is speculative (kept for the
        later steps of this draft only).  Pick k = argmax (ties -> smaller id) of step k's logits at
        T = 0, else a draw from filtered_probs.  info: "logits" [B-1, V] (target ids; -inf outside a
        reduced draft vocabulary), "q" [B-1, V] the distributions drawn from, "margins" top1-top2
        gaps (tie checks), "feedback" [B-1, H] the fed-back hidden of each step.

One step (row at position p, token x = the token at p + 1, hidden g):
  EAGLE-3: e = input_layernorm(emb(x)); n = hidden_norm(g); a = [e ; n] (2H)
           attention (q/k/v of a, RoPE at p, causal over the drafter's own K/V) -> o_proj
           x1 = r + attn, r = n if norm_before_residual else g;  x2 = x1 + MLP(post_attention_layernorm(x1))
           logits = lm_head(norm(x2)) over the draft vocabulary, draft id i -> target id i + d2t[i]
           feedback h = x2 (pre-norm).  Step 1: g = fc(taps) [3 taps: low | mid | high].
  MTP:     u = fc([En(emb(x)) ; Hn(g)]) (2H -> H); one decoder layer of the target's shape on u
           (input_layernorm, attention, post_attention_layernorm, MLP, residuals)
           logits = head(norm(x2)) (the target's head, or DeepSeek's shared_head.head)
           feedback: post_norm -> norm(x2) (Qwen3-Next / Qwen3.5 `mtp.*`), pre_norm -> x2 (DeepSeek
           names).  Step 1: g = the target's last hidden after its final norm (the tap of layer L-1
           through the target's norm).
  Context rows (KV only): the K/V of the same row computed from a (EAGLE-3) or input_layernorm(u)
  (MTP); no attention needed.

Layouts (names; a "model." prefix is accepted everywhere):
  EAGLE-3 `midlayer.*` (EAGLE / SpecForge: LlamaForCausalLMEagle3, Eagle3LlamaForCausalLM) and
  speculators `layers.0.*` (Eagle3Speculator, nested transformer_layer_config): fc.weight [H, T*Ht],
  <p>input_layernorm, <p>hidden_norm, <p>self_attn.{q,k,v}_proj [.., 2H], <p>self_attn.o_proj,
  <p>post_attention_layernorm, <p>mlp.{gate,up,down}_proj, norm.weight, lm_head.weight [Vd, H],
  d2t [Vd] (offsets), optional embed_tokens.weight [V, H], t2d (ignored).
  MTP `mtp.*`: mtp.fc, mtp.pre_fc_norm_embedding, mtp.pre_fc_norm_hidden, mtp.layers.0.*, mtp.norm;
  DeepSeek: model.layers.{L}.{enorm, hnorm, eh_proj, <layer>, shared_head.norm[, shared_head.head]}.

Tap convention (eagle_aux_hidden_state_layer_ids, SGLang's rule): first id == 1 -> "output of layer
id" (tap = id); otherwise "input of layer id" (tap = id - 1; id L = the last layer's output).
Absent: input-of-layer {2, L//2, L-3} (EAGLE's own choice) -> taps {1, L//2-1, L-4}.
"""
import torch

from dflash_ref import filtered_probs, sample_from
from qwen3_ref import _get, apply_rope, argmax_smallest, attention, parse_rope_theta, rms_norm
from safetensors_io import load_hf_dir

EAGLE3_ARCHS = ("LlamaForCausalLMEagle3", "Eagle3LlamaForCausalLM", "Eagle3Speculator")


def tap_layers_from_aux(ids, L):
    """(taps, convention) of eagle_aux_hidden_state_layer_ids `ids` (None: EAGLE's default)."""
    if ids is None:
        ids = [2, L // 2, L - 3]
        conv = "input"
    else:
        conv = "output" if ids[0] == 1 else "input"
    taps = [i if conv == "output" else i - 1 for i in ids]
    for t in taps:
        if not 0 <= t < L:
            raise ValueError(f"aux layer ids {ids} ({conv} of layer) fall outside the target's {L} layers")
    return taps, conv


class ChainConfig:
    @classmethod
    def from_dict(cls, d, target_num_layers):
        c = cls()
        c.raw = d
        archs = d.get("architectures") or []
        L = int(target_num_layers)
        if any(a in archs for a in EAGLE3_ARCHS):
            c.kind = "eagle3"
            base = d.get("transformer_layer_config") if "Eagle3Speculator" in archs else d
            ec = d.get("eagle_config") or {}
            ids = ec.get("eagle_aux_hidden_state_layer_ids", d.get("eagle_aux_hidden_state_layer_ids"))
            c.target_layer_ids, c.aux_convention = tap_layers_from_aux(ids, L)
            c.aux_ids = ids
            c.norm_before_residual = bool(d.get("norm_before_residual", False))
            c.mtp_feedback = None
            c.num_layers = 1
        else:
            n = d.get("mtp_num_hidden_layers", d.get("num_nextn_predict_layers"))
            if not n:
                raise ValueError("neither an EAGLE-3 architecture nor MTP layers in the config")
            c.kind = "mtp"
            base = d
            c.target_layer_ids, c.aux_convention, c.aux_ids = [L - 1], "output", None
            c.norm_before_residual = False
            c.mtp_feedback = d.get("mtp_feedback")
            c.num_layers = int(n)
            if c.num_layers != 1:
                raise ValueError("only one MTP layer is implemented")
            if int(base["num_hidden_layers"]) != L:
                raise ValueError("an MTP head's config is its target's")
        c.model_type = base.get("model_type", "llama")
        c.hidden_size = int(base["hidden_size"])
        c.intermediate_size = int(base["intermediate_size"])
        c.num_attention_heads = int(base["num_attention_heads"])
        c.num_key_value_heads = int(base.get("num_key_value_heads", c.num_attention_heads))
        c.head_dim = int(base.get("head_dim") or c.hidden_size // c.num_attention_heads)
        c.rms_norm_eps = float(base.get("rms_norm_eps", 1e-6))
        c.rope_theta = parse_rope_theta(base)
        c.vocab_size = int(base["vocab_size"])
        c.draft_vocab_size = int(d.get("draft_vocab_size") or c.vocab_size)
        c.target_hidden_size = int(d.get("target_hidden_size") or c.hidden_size)
        c.target_num_layers = L
        return c


class ChainContext:
    def __init__(self):
        self.k = None  # [nkv, n, hd] committed drafter K/V, positions 0..n-1
        self.v = None
        self.pending = None  # (position, feature row) waiting for the token after it

    @property
    def length(self):
        return 0 if self.k is None else self.k.shape[1]


class ChainDrafter:
    def __init__(self, cfg, tensors, target):
        c = self.cfg = cfg
        self.target = target
        H, I, V, Vd = c.hidden_size, c.intermediate_size, c.vocab_size, c.draft_vocab_size
        nh, nkv, hd = c.num_attention_heads, c.num_key_value_heads, c.head_dim
        if V != target.cfg.vocab_size:
            raise ValueError("vocab_size != the target's")
        if c.target_hidden_size != target.cfg.hidden_size:
            raise ValueError("target_hidden_size != the target's hidden size")
        names = set(k[6:] if k.startswith("model.") else k for k in tensors)
        T, Ht = len(c.target_layer_ids), c.target_hidden_size
        if c.kind == "eagle3":
            p = "midlayer." if "midlayer.hidden_norm.weight" in names else "layers.0."
            self.layout = p[:-1]
            A = 2 * H
            self.fc = _get(tensors, "fc.weight", [H, T * Ht])
            self.enorm = _get(tensors, p + "input_layernorm.weight", [H])
            self.hnorm = _get(tensors, p + "hidden_norm.weight", [H])
            self.norm_w = _get(tensors, "norm.weight", [H])
            self.head = _get(tensors, "lm_head.weight", [Vd, H]) if "lm_head.weight" in names else None
            if self.head is None and Vd != V:
                raise ValueError("a reduced draft vocabulary needs lm_head.weight")
            self.embed_w = _get(tensors, "embed_tokens.weight", [V, H]) if "embed_tokens.weight" in names else None
            d2t = torch.arange(Vd)
            for nm in ("d2t", "model.d2t"):
                if nm in tensors:
                    d2t = torch.arange(Vd) + tensors[nm].long().reshape(-1)
            if Vd < V and "d2t" not in names:
                raise ValueError("draft_vocab_size < vocab_size needs d2t")
            self.d2t = d2t
        else:
            L = c.target_num_layers
            if "mtp.fc.weight" in names:
                self.layout = "mtp"
                p = "mtp.layers.0."
                self.fc = _get(tensors, "mtp.fc.weight", [H, 2 * H])
                self.enorm = _get(tensors, "mtp.pre_fc_norm_embedding.weight", [H])
                self.hnorm = _get(tensors, "mtp.pre_fc_norm_hidden.weight", [H])
                self.norm_w = _get(tensors, "mtp.norm.weight", [H])
                self.head = None
            else:
                self.layout = "deepseek"
                p = f"layers.{L}."
                self.fc = _get(tensors, p + "eh_proj.weight", [H, 2 * H])
                self.enorm = _get(tensors, p + "enorm.weight", [H])
                self.hnorm = _get(tensors, p + "hnorm.weight", [H])
                self.norm_w = _get(tensors, p + "shared_head.norm.weight", [H])
                hn = p + "shared_head.head.weight"
                self.head = _get(tensors, hn, [V, H]) if hn in names else None
            self.embed_w = None
            self.d2t = torch.arange(V)
            A = H
            if c.mtp_feedback is None:
                c.mtp_feedback = "post_norm" if self.layout == "mtp" else "pre_norm"
        self.layer = {
            "in": _get(tensors, p + "input_layernorm.weight", [H]),
            "post": _get(tensors, p + "post_attention_layernorm.weight", [H]),
            "q": _get(tensors, p + "self_attn.q_proj.weight", [nh * hd, A]),
            "k": _get(tensors, p + "self_attn.k_proj.weight", [nkv * hd, A]),
            "v": _get(tensors, p + "self_attn.v_proj.weight", [nkv * hd, A]),
            "o": _get(tensors, p + "self_attn.o_proj.weight", [H, nh * hd]),
            "gate": _get(tensors, p + "mlp.gate_proj.weight", [I, H]),
            "up": _get(tensors, p + "mlp.up_proj.weight", [I, H]),
            "down": _get(tensors, p + "mlp.down_proj.weight", [H, I]),
        }
        if c.model_type == "qwen3":
            self.layer["qn"] = _get(tensors, p + "self_attn.q_norm.weight", [hd])
            self.layer["kn"] = _get(tensors, p + "self_attn.k_norm.weight", [hd])

    @classmethod
    def from_dir(cls, path, target):
        cfg, tensors = load_hf_dir(path)
        return cls(ChainConfig.from_dict(cfg, target.cfg.num_hidden_layers), tensors, target)

    def new_context(self):
        return ChainContext()

    # ---- one row ----
    def _embed(self, tok):
        w = self.embed_w if self.embed_w is not None else self.target.embed_w
        return w[torch.tensor([tok])][0]

    def _first_hidden(self, feat):
        """g of step 1 from the target features of the row."""
        if self.cfg.kind == "eagle3":
            return feat @ self.fc.t()
        return rms_norm(feat, self.target.norm_w, self.target.cfg.rms_norm_eps)

    def _attn_input(self, tok, g):
        """(attention input a, residual r) of a row."""
        c, eps = self.cfg, self.cfg.rms_norm_eps
        e = rms_norm(self._embed(tok), self.enorm, eps)
        n = rms_norm(g, self.hnorm, eps)
        if c.kind == "eagle3":
            return torch.cat([e, n]), (n if c.norm_before_residual else g)
        u = torch.cat([e, n]) @ self.fc.t()
        return rms_norm(u, self.layer["in"], eps), u

    def _kv(self, a, pos):
        c, L = self.cfg, self.layer
        k = (a @ L["k"].t()).view(1, c.num_key_value_heads, c.head_dim).transpose(0, 1)
        v = (a @ L["v"].t()).view(1, c.num_key_value_heads, c.head_dim).transpose(0, 1)
        if "kn" in L:
            k = rms_norm(k, L["kn"], c.rms_norm_eps)
        return apply_rope(k, [pos], c.rope_theta), v

    def _row(self, tok, g, pos, kcache, vcache):
        """Full step of one row: (logits [V] in target ids, feedback [H], k, v of the row)."""
        c, L, eps = self.cfg, self.layer, self.cfg.rms_norm_eps
        nh, hd = c.num_attention_heads, c.head_dim
        a, r = self._attn_input(tok, g)
        k, v = self._kv(a, pos)
        K = k if kcache is None else torch.cat([kcache, k], 1)
        Vv = v if vcache is None else torch.cat([vcache, v], 1)
        q = (a @ L["q"].t()).view(1, nh, hd).transpose(0, 1)
        if "qn" in L:
            q = rms_norm(q, L["qn"], eps)
        q = apply_rope(q, [pos], c.rope_theta)
        mask = torch.ones(1, K.shape[1], dtype=torch.bool)
        att = attention(q, K, Vv, mask).transpose(0, 1).reshape(nh * hd) @ L["o"].t()
        x = r + att
        m = rms_norm(x, L["post"], eps)
        x = x + (torch.nn.functional.silu(m @ L["gate"].t()) * (m @ L["up"].t())) @ L["down"].t()
        y = rms_norm(x, self.norm_w, eps)
        if self.head is not None:
            raw = y @ self.head.t()
        else:
            raw = self.target.lm_head(y)
        full = torch.full((c.vocab_size,), float("-inf"))
        full[self.d2t] = raw
        fb = y if (c.kind == "mtp" and c.mtp_feedback == "post_norm") else x
        return full, fb, k, v

    # ---- context ----
    def _commit_kv(self, ctx, k, v):
        ctx.k = k if ctx.k is None else torch.cat([ctx.k, k], 1)
        ctx.v = v if ctx.v is None else torch.cat([ctx.v, v], 1)

    def add_context(self, ctx, features, tokens, positions):
        features = features.float()
        for feat, tok, pos in zip(features, tokens, positions):
            if ctx.pending is not None:
                ppos, pfeat = ctx.pending
                assert pos == ppos + 1 == ctx.length + 1
                a, _ = self._attn_input(int(tok), self._first_hidden(pfeat))
                self._commit_kv(ctx, *self._kv(a, ppos))
            else:
                assert pos == ctx.length
            ctx.pending = (int(pos), feat)

    # ---- drafting ----
    def draft_chain(self, ctx, anchor, B, temperature=0.0, top_p=1.0, top_k=0, generator=None):
        ppos, pfeat = ctx.pending
        assert ppos == ctx.length
        picks, rows, qs, margins, fbs = [], [], [], [], []
        tok, g, pos = anchor, self._first_hidden(pfeat), ppos
        kc, vc = ctx.k, ctx.v
        for step in range(1, B):
            logits, fb, k, v = self._row(tok, g, pos, kc, vc)
            kc = k if kc is None else torch.cat([kc, k], 1)
            vc = v if vc is None else torch.cat([vc, v], 1)
            if step == 1:  # the pending row is context: committed
                self._commit_kv(ctx, k, v)
                ctx.pending = None
            srt = torch.sort(logits[torch.isfinite(logits)], descending=True).values
            margins.append(float(srt[0] - srt[1]))
            if temperature <= 0:
                pick = argmax_smallest(logits)
                q = torch.zeros(logits.numel(), dtype=torch.float64)
            else:
                q = filtered_probs(logits, temperature, top_p, top_k)
                pick = sample_from(q, generator)
            picks.append(pick)
            rows.append(logits)
            qs.append(q)
            fbs.append(fb)
            tok, g, pos = pick, fb, pos + 1
        return picks, {"logits": torch.stack(rows), "q": torch.stack(qs), "margins": margins,
                       "feedback": torch.stack(fbs)}
