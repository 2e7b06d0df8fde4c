"""The embedded chain drafters: a tiny EAGLE-3 drafter and a tiny MTP head for models/tiny-qwen3,
trained on the DFlash drafters' distillation data with the same step count, batch and anchors
(scripts/train/build_all.py, stage "chain").

Layouts (docs/checkpoints.md): EAGLE-3 as EAGLE / SpecForge write it (LlamaForCausalLMEagle3,
`midlayer.*`, fc over three taps, own lm_head, d2t / t2d of the full vocabulary); MTP in the
Qwen3.5 names (`mtp.*`, the target's config plus mtp_num_hidden_layers 1, post-norm feedback).

Objective (EAGLE-3's training-time test, for both): for an anchor a of a sequence (the DFlash
anchors: the block [x_a, ...] predicts x_{a+1..a+B-1}), the chain's row t = a-1 is fed token x_a
and the target's features at t (EAGLE-3: fc of the taps; MTP: the final-normed hidden) and
predicts x_{a+1}; step k >= 2 is fed x_{a+k-1} (teacher-forced) and the previous step's own
hidden, at position a+k-2, attending to the context rows (every position <= t, computed in
parallel as step 1 of the chains anchored there) and to its own chain's earlier steps; it
predicts x_{a+k}. Loss: cross-entropy per step weighted exp(-(k-1)/gamma), as the block drafters'.
"""
import math
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from models import MLP, RMSNorm, apply_rope, count_params, rope_cos_sin
from train import AUTOCAST, log, lr_at

EAGLE3_AUX_IDS = [1, 2, 3]  # output of layers 1, 2, 3 (first id 1: the output-of-layer convention)


def chain_configs(tcfg):
    keys = ("hidden_size", "intermediate_size", "num_attention_heads", "num_key_value_heads", "head_dim",
            "rms_norm_eps", "rope_theta", "vocab_size", "max_position_embeddings", "hidden_act", "eos_token_id")
    e3 = {k: tcfg[k] for k in keys}
    e3.update({"architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "num_hidden_layers": 1,
               "draft_vocab_size": tcfg["vocab_size"], "target_hidden_size": tcfg["hidden_size"],
               "norm_before_residual": False, "tie_word_embeddings": False, "attention_bias": False,
               "torch_dtype": "bfloat16",
               "eagle_config": {"eagle_aux_hidden_state_layer_ids": EAGLE3_AUX_IDS, "use_aux_hidden_state": True}})
    mtp = dict(tcfg)
    mtp["mtp_num_hidden_layers"] = 1
    return {"eagle3": e3, "mtp": mtp}


class ChainAttention(nn.Module):
    def __init__(self, cfg, A, qk_norm):
        super().__init__()
        H, nh, nkv, hd = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"], cfg["head_dim"]
        self.nh, self.nkv, self.hd = nh, nkv, hd
        self.q_proj = nn.Linear(A, nh * hd, bias=False)
        self.k_proj = nn.Linear(A, nkv * hd, bias=False)
        self.v_proj = nn.Linear(A, nkv * hd, bias=False)
        self.o_proj = nn.Linear(nh * hd, H, bias=False)
        if qk_norm:
            self.q_norm = RMSNorm(hd, cfg["rms_norm_eps"])
            self.k_norm = RMSNorm(hd, cfg["rms_norm_eps"])
        self.qk_norm = qk_norm

    def qkv(self, a, cos, sin):
        """a [..., n, A] -> q [..., nh, n, hd], k / v [..., nkv, n, hd] (RoPE applied)"""
        sh = a.shape[:-1]
        q = self.q_proj(a).view(*sh, self.nh, self.hd).transpose(-2, -3)
        k = self.k_proj(a).view(*sh, self.nkv, self.hd).transpose(-2, -3)
        v = self.v_proj(a).view(*sh, self.nkv, self.hd).transpose(-2, -3)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        return apply_rope(q, cos, sin), apply_rope(k, cos, sin), v


class ChainLayer(nn.Module):
    def __init__(self, cfg, eagle3):
        super().__init__()
        H = cfg["hidden_size"]
        self.input_layernorm = RMSNorm(H, cfg["rms_norm_eps"])
        if eagle3:
            self.hidden_norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.self_attn = ChainAttention(cfg, 2 * H if eagle3 else H, qk_norm=not eagle3)
        self.post_attention_layernorm = RMSNorm(H, cfg["rms_norm_eps"])
        self.mlp = MLP(cfg)


class Eagle3Drafter(nn.Module):
    """state_dict names: fc.weight, midlayer.*, norm.weight, lm_head.weight (d2t / t2d at export)"""

    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.cfg, self.kind = cfg, "eagle3"
        self.fc = nn.Linear(len(EAGLE3_AUX_IDS) * H, H, bias=False)
        self.midlayer = ChainLayer(cfg, True)
        self.norm = RMSNorm(H, cfg["rms_norm_eps"])
        self.lm_head = nn.Linear(H, cfg["draft_vocab_size"], bias=False)
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def taps(self):
        return EAGLE3_AUX_IDS

    def first_hidden(self, feats, target):
        return self.fc(feats)

    def prepare(self, emb, g):
        L = self.midlayer
        return torch.cat([L.input_layernorm(emb), L.hidden_norm(g)], -1), g

    def layer(self):
        return self.midlayer

    def out(self, x, target):
        y = self.norm(x)
        return self.lm_head(y).float(), x  # fed back: pre-norm


class MtpHead(nn.Module):
    """state_dict names: mtp.fc.weight, mtp.pre_fc_norm_embedding / _hidden, mtp.layers.0.*, mtp.norm"""

    def __init__(self, cfg):
        super().__init__()
        H = cfg["hidden_size"]
        self.cfg, self.kind = cfg, "mtp"
        self.mtp = nn.Module()
        self.mtp.fc = nn.Linear(2 * H, H, bias=False)
        self.mtp.pre_fc_norm_embedding = RMSNorm(H, cfg["rms_norm_eps"])
        self.mtp.pre_fc_norm_hidden = RMSNorm(H, cfg["rms_norm_eps"])
        self.mtp.layers = nn.ModuleList([ChainLayer(cfg, False)])
        self.mtp.norm = RMSNorm(H, cfg["rms_norm_eps"])
        for n, p in self.named_parameters():
            if p.dim() == 2:
                nn.init.normal_(p, std=0.02)

    def taps(self):
        return [self.cfg["num_hidden_layers"] - 1]

    def first_hidden(self, feats, target):
        return target.model.norm(feats)

    def prepare(self, emb, g):
        m = self.mtp
        u = m.fc(torch.cat([m.pre_fc_norm_embedding(emb), m.pre_fc_norm_hidden(g)], -1))
        return m.layers[0].input_layernorm(u), u

    def layer(self):
        return self.mtp.layers[0]

    def out(self, x, target):
        y = self.mtp.norm(x)
        return target.head(y).float(), y  # the target's head; fed back: post-norm


def _mlp_block(L, x):
    return x + L.mlp(L.post_attention_layernorm(x))


def chain_forward(model, target, ids, feats, anchors, avalid, K, labels=None):
    """Logits [b, N, K, V] of the K chain steps at every anchor. ids [b, S'] padded tokens, feats
    [b, S, F] the model's target features, anchors [b, N] (a >= 1: the chain's first row is t = a-1).
    labels [b, N, K] (teacher forcing: step k >= 2 is fed the true x_{a+k-1}); None: fed its own
    greedy picks (inference)."""
    cfg = model.cfg
    E = target.model.embed_tokens.weight.detach()
    b, S, _ = feats.shape
    N = anchors.shape[1]
    L = model.layer()
    at = L.self_attn
    rep = at.nh // at.nkv
    # step 1 at every position t: token x_{t+1}, hidden from the features of t (the context rows)
    g = model.first_hidden(feats, target)
    a_in, resid = model.prepare(F.embedding(ids[:, 1:S + 1], E), g)
    pos = torch.arange(S).unsqueeze(0).expand(b, S)
    cos, sin = rope_cos_sin(pos, cfg["head_dim"], cfg["rope_theta"])
    q, k1, v1 = at.qkv(a_in, cos.unsqueeze(1), sin.unsqueeze(1))  # [b,h,S,hd]
    t = (anchors - 1).clamp(min=0)  # [b,N]
    gi = t.view(b, 1, N, 1)
    qa = torch.gather(q, 2, gi.expand(b, at.nh, N, at.hd))  # the anchors' step-1 queries
    ra = torch.gather(resid, 1, t.view(b, N, 1).expand(b, N, resid.shape[-1]))
    kr, vr = k1.repeat_interleave(rep, 1), v1.repeat_interleave(rep, 1)
    cmask = (torch.arange(S).view(1, 1, S) <= t.unsqueeze(-1)).unsqueeze(1)  # [b,1,N,S]
    spec_k, spec_v, outs, tok = [], [], [], None
    for k in range(1, K + 1):
        if k > 1:
            nxt = labels[:, :, k - 2].clamp(min=0) if labels is not None else tok
            a_in, ra = model.prepare(F.embedding(nxt, E), fb)
            p = (t + k - 1).clamp(max=cfg["max_position_embeddings"] - 1)
            c, s_ = rope_cos_sin(p, cfg["head_dim"], cfg["rope_theta"])
            qa, kk, vv = at.qkv(a_in, c.unsqueeze(1), s_.unsqueeze(1))  # [b,h,N,hd]
            spec_k.append(kk.repeat_interleave(rep, 1))
            spec_v.append(vv.repeat_interleave(rep, 1))
        sc = torch.matmul(qa, kr.transpose(-1, -2)).float().masked_fill(~cmask, float("-inf"))
        parts = [sc]
        for kk in spec_k:  # the chain's own earlier steps (2..k) and itself
            parts.append((qa * kk).sum(-1, keepdim=True).float())
        pr = torch.softmax(torch.cat(parts, -1) / math.sqrt(at.hd), -1)
        o = torch.matmul(pr[..., :S].to(vr.dtype), vr)
        for j, vv in enumerate(spec_v):
            o = o + pr[..., S + j:S + j + 1].to(vv.dtype) * vv
        x = ra + at.o_proj(o.transpose(1, 2).reshape(b, N, at.nh * at.hd))
        x = _mlp_block(L, x)
        logits, fb = model.out(x, target)
        outs.append(logits)
        tok = logits.argmax(-1)
    return torch.stack(outs, 2)


def chain_batch(seqs, target, taps, n_anchor, B, gen):
    """padded ids, the target's tap features, anchors (as the block drafters' make_batch picks
    them) and labels [b, N, B-1] (x_{a+k}, -100 outside the sequence)"""
    S = max(len(s["ids"]) for s in seqs)
    b = len(seqs)
    ids = torch.zeros(b, S + B + 1, dtype=torch.long)
    lens = torch.tensor([len(s["ids"]) for s in seqs])
    for i, s in enumerate(seqs):
        ids[i, : len(s["ids"])] = torch.tensor(s["ids"])
    anchors = torch.ones(b, n_anchor, dtype=torch.long)
    avalid = torch.zeros(b, n_anchor, dtype=torch.bool)
    for i, s in enumerate(seqs):
        lo, hi = max(1, s["plen"] - 1), len(s["ids"]) - 2
        cand = torch.arange(lo, hi + 1)
        if len(cand) == 0:
            continue
        k = min(n_anchor, len(cand))
        sel = cand[torch.randperm(len(cand), generator=gen)[:k]].sort().values
        anchors[i, :k] = sel
        avalid[i, :k] = True
    with torch.no_grad(), torch.autocast(**AUTOCAST):
        _, feats = target(ids[:, :S], taps=taps)
    pos = anchors.unsqueeze(-1) + torch.arange(1, B)
    lab = torch.gather(ids, 1, pos.view(b, -1)).view(b, n_anchor, B - 1)
    inside = (pos < lens.view(b, 1, 1)) & avalid.unsqueeze(-1)
    return ids, feats.detach(), anchors, avalid, lab.masked_fill(~inside, -100)


def chain_loss(model, target, batch, gamma):
    ids, feats, anchors, avalid, labels = batch
    K = labels.shape[-1]
    with torch.autocast(**AUTOCAST):
        logits = chain_forward(model, target, ids, feats, anchors, avalid, K, labels)
    V = logits.shape[-1]
    w = torch.exp(-(torch.arange(1, K + 1, dtype=torch.float32) - 1) / gamma).view(1, 1, K)
    valid = labels >= 0
    ce = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1).clamp(min=0), reduction="none").view(labels.shape)
    wv = w * valid
    with torch.no_grad():
        acc1 = ((logits[:, :, 0].argmax(-1) == labels[:, :, 0]) & valid[:, :, 0]).sum().float() / valid[:, :, 0].sum().clamp(min=1)
    return (ce * wv).sum() / wv.sum(), float(acc1)


def _feats(model, target, ids, S):
    with torch.no_grad(), torch.autocast(**AUTOCAST):
        _, f = target(ids[:, :S], taps=model.taps())
    return f


@torch.no_grad()
def chain_block_tau(model, target, seqs, B, n_anchor=24, seed=0):
    """greedy acceptance estimate on greedy sequences (as train.block_tau): the chain fed its own
    picks; 1 + the leading run of correct steps"""
    gen = torch.Generator().manual_seed(seed)
    tot, cyc = 0.0, 0
    for bi in range(0, len(seqs), 16):
        ch = seqs[bi: bi + 16]
        ids, feats, anchors, avalid, labels = chain_batch(ch, target, model.taps(), n_anchor, B, gen)
        with torch.autocast(**AUTOCAST):
            d = chain_forward(model, target, ids, feats, anchors, avalid, B - 1, None).argmax(-1)
        ok = (d == labels).long().cumprod(-1)
        sel = (labels[:, :, -1] >= 0) & avalid
        for i, s in enumerate(ch):
            sel[i] &= s["greedy"]
        if sel.sum() == 0:
            continue
        tot += float((ok.sum(-1) + 1)[sel].sum())
        cyc += int(sel.sum())
    return tot / max(cyc, 1)


def train_chain_drafters(cfgs, target, seqs, val_seqs, seed, steps, B=16, gamma=7.0, batch=16, n_anchor=32,
                         peak_lr=2e-3, logf=None, ckpt=None, deadline=None, ckpt_every=50):
    """EAGLE-3 and MTP trained jointly (same batches and anchors), resumable like train_drafters.
    Returns (models, info) or (None, info) when the deadline stopped training early."""
    torch.manual_seed(seed)
    models = {"eagle3": Eagle3Drafter(cfgs["eagle3"]), "mtp": MtpHead(cfgs["mtp"])}
    log("chain drafter params " + " ".join(f"{k} {count_params(m)}" for k, m in models.items()), logf)
    for p in target.parameters():
        p.requires_grad_(False)
    opts = {k: torch.optim.AdamW(m.parameters(), lr=peak_lr, betas=(0.9, 0.95), weight_decay=0.01)
            for k, m in models.items()}
    gen = torch.Generator().manual_seed(seed)
    rng = random.Random(seed)
    st = {"order": [], "step": 0, "ema": None, "wall_s": 0.0, "val": []}
    if ckpt and os.path.exists(ckpt):
        c = torch.load(ckpt)
        if c["steps"] != steps or c["n_seqs"] != len(seqs):
            raise SystemExit(f"{ckpt}: a checkpoint of a different run; remove it to start over")
        for k, m in models.items():
            m.load_state_dict(c["models"][k])
            opts[k].load_state_dict(c["opts"][k])
        gen.set_state(c["gen"])
        rng.setstate(c["rng"])
        torch.set_rng_state(c["torch_rng"])
        st = c["st"]
        log(f"chain drafters: resumed at step {st['step']}/{steps} from {ckpt}", logf)

    def save():
        if ckpt:
            torch.save({"steps": steps, "n_seqs": len(seqs), "st": st, "gen": gen.get_state(), "rng": rng.getstate(),
                        "torch_rng": torch.get_rng_state(), "models": {k: m.state_dict() for k, m in models.items()},
                        "opts": {k: o.state_dict() for k, o in opts.items()}}, ckpt + ".tmp")
            os.replace(ckpt + ".tmp", ckpt)

    taps = sorted(set(EAGLE3_AUX_IDS) | set(models["mtp"].taps()))
    t0 = time.time() - st["wall_s"]
    while st["step"] < steps:
        i = st["step"]
        if len(st["order"]) < batch:
            st["order"] = st["order"] + rng.sample(range(len(seqs)), len(seqs))
        ch, st["order"] = st["order"][:batch], st["order"][batch:]
        ids, feats, anchors, avalid, labels = chain_batch([seqs[j] for j in ch], target, taps, n_anchor, B, gen)
        H = target.cfg["hidden_size"]
        cur = {}
        for k, m in models.items():
            f = torch.cat([feats[..., taps.index(x) * H:(taps.index(x) + 1) * H] for x in m.taps()], -1)
            for pg in opts[k].param_groups:
                pg["lr"] = lr_at(i, steps, peak_lr, 50)
            loss, acc1 = chain_loss(m, target, (ids, f, anchors, avalid, labels), gamma)
            opts[k].zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opts[k].step()
            cur[k], cur[k + "_acc1"] = float(loss), acc1
        st["ema"] = cur if st["ema"] is None else {k: 0.98 * st["ema"][k] + 0.02 * v for k, v in cur.items()}
        st["step"] = i + 1
        st["wall_s"] = time.time() - t0
        if i % 25 == 0 or i == steps - 1:
            e = st["ema"]
            log(f"chain step {i}/{steps} eagle3 {cur['eagle3']:.3f} (ema {e['eagle3']:.3f} acc1 {cur['eagle3_acc1']:.3f}) "
                f"mtp {cur['mtp']:.3f} (ema {e['mtp']:.3f} acc1 {cur['mtp_acc1']:.3f}) {st['wall_s']:.0f}s", logf)
        if i % 250 == 0 and i > 0:
            vt = {k: round(chain_block_tau(m, target, val_seqs[:64], B), 3) for k, m in models.items()}
            st["val"].append({"step": i, **vt})
            log(f"  val block-tau {vt}", logf)
        if st["step"] % ckpt_every == 0 or st["step"] == steps:
            save()
        if deadline and time.time() > deadline and st["step"] < steps:
            save()
            log(f"chain drafters: time budget spent at step {st['step']}/{steps}; rerun to resume", logf)
            return None, {"stopped_at": st["step"]}
    e = st["ema"]
    info = {"steps": steps, "batch_sequences": batch, "anchors_per_sequence": n_anchor, "block_size": B, "gamma": gamma,
            "peak_lr": peak_lr, "wall_s": round(st["wall_s"], 1), "val_block_tau_during_training": st["val"],
            "final_loss_ema": {"eagle3": round(e["eagle3"], 4), "mtp": round(e["mtp"], 4)},
            "params": {k: count_params(m) for k, m in models.items()},
            "val_block_tau": {k: chain_block_tau(m, target, val_seqs, B) for k, m in models.items()}}
    return models, info


def export_chain(out, cfgs, states, build_note):
    """models/tiny-qwen3-eagle3, models/tiny-qwen3-mtp: config.json + BF16 model.safetensors"""
    from safetensors_io import save_hf_dir
    dirs = {"eagle3": "tiny-qwen3-eagle3", "mtp": "tiny-qwen3-mtp"}
    for k, sd in states.items():
        s = {n: v.detach().to(torch.bfloat16).contiguous() for n, v in sd.items()}
        if k == "eagle3":
            V = cfgs[k]["draft_vocab_size"]
            s["d2t"] = torch.zeros(V, dtype=torch.int64)  # the full vocabulary: offsets 0
            s["t2d"] = torch.ones(cfgs[k]["vocab_size"], dtype=torch.bool)
        save_hf_dir(os.path.join(out, dirs[k]), cfgs[k], s, metadata={"source": "scripts/train/build_all", **build_note})
    return dirs
