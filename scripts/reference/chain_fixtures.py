"""The EAGLE-3 and MTP fixtures of tests/data (part `chain` of make_fixtures.py; README.md).

    /usr/bin/python3 scripts/reference/make_fixtures.py chain

Drafters for qwen3-f32-tied (trained briefly, teacher-forced, so that cycles mix acceptance
lengths), one per checkpoint layout:
  eagle3-f32            LlamaForCausalLMEagle3, `midlayer.*`, eagle_config ids [1, 3, 4] (output-of-
                        layer convention: first id 1), draft vocabulary 64 (I64 offset d2t, BOOL t2d)
  eagle3-specul-f32     Eagle3Speculator, `layers.0.*`, nested transformer_layer_config, top-level ids
                        [2, 3, 5] (input-of-layer: taps 1, 2, 4), norm_before_residual, own
                        embed_tokens, full draft vocabulary with a zero d2t
  mtp-f32               Qwen3.5 / Qwen3-Next `mtp.*` (mtp_num_hidden_layers 1): post-norm feedback
  mtp-deepseek-f32      DeepSeek names `model.layers.6.{enorm, hnorm, eh_proj, ..., shared_head.*}`
                        (num_nextn_predict_layers 1): pre-norm feedback, own shared_head.head
and untrained ones for the 16-token target (the chi-square sampling test):
  eagle3-v16-f32        draft vocabulary 12 of 16 (d2t)
  mtp-v16-f32           `mtp.*`

golden.json (as the other drafters', docs in README.md): "context_tokens", "anchor", "block_size",
"tap_layers", "variants": {V: {"logits": [[Vd] x B-1] (draft id order), "topk_ids", "picks"}},
"draft_to_target" ([Vd] ids), "cycle" (prompt, traces, outputs == ar).
"""
import math
import os
import shutil

import torch

from chain_ref import ChainDrafter
from cycle_ref import speculative_generate
from dflash_ref import topk_desc
from qwen3_ref import Target, greedy_generate
from safetensors_io import save_hf_dir

CHAIN_TRAIN_STEPS = 400
UNROLL = 3  # training-time test: steps per anchor, each fed back its own hidden


def _mf():
    import make_fixtures  # lazy: make_fixtures imports this module
    return make_fixtures


def llama_shape(V, eos, layers=1):
    return {"model_type": "llama", "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": layers,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16, "rms_norm_eps": 1e-6,
            "rope_theta": 10000.0, "vocab_size": V, "max_position_embeddings": 256, "hidden_act": "silu",
            "attention_bias": False, "bos_token_id": 0, "eos_token_id": eos, "tie_word_embeddings": False,
            "torch_dtype": "float32"}


def eagle3_config(V, eos, ids, draft_vocab, speculators=False, norm_before_residual=False):
    base = llama_shape(V, eos)
    if not speculators:
        c = dict(base, architectures=["LlamaForCausalLMEagle3"], draft_vocab_size=draft_vocab,
                 eagle_config={"eagle_aux_hidden_state_layer_ids": ids, "use_aux_hidden_state": True})
        if norm_before_residual:
            c["norm_before_residual"] = True
        return c
    base["architectures"] = ["LlamaForCausalLM"]
    return {"architectures": ["Eagle3Speculator"], "speculators_model_type": "eagle3",
            "draft_vocab_size": draft_vocab, "norm_before_residual": norm_before_residual,
            "target_hidden_size": None, "eagle_aux_hidden_state_layer_ids": ids,
            "transformer_layer_config": base,
            "speculators_config": {"algorithm": "eagle3", "default_proposal_method": "greedy",
                                   "proposal_methods": [{"proposal_type": "greedy", "speculative_tokens": 7}],
                                   "verifier": {"name_or_path": "qwen3-f32-tied", "architectures": ["Qwen3ForCausalLM"]}},
            "torch_dtype": "float32"}


def eagle3_tensors(g, prefix, V, draft_ids, own_embed, t2d=True):
    mf = _mf()
    H, Vd = 32, len(draft_ids)
    t = {"fc.weight": mf.lin(g, H, 3 * H), "norm.weight": mf.normw(g, H), "lm_head.weight": 2 * mf.lin(g, Vd, H)}
    lay = mf.layer_tensors(g, prefix, H, 64, 4, 2, 16, False)
    for k in ("q_proj", "k_proj", "v_proj"):  # attention input [emb ; hidden]: 2H
        n = f"{prefix}self_attn.{k}.weight"
        lay[n] = mf.lin(g, lay[n].shape[0], 2 * H)
    lay[prefix + "hidden_norm.weight"] = mf.normw(g, H)
    t.update(lay)
    t["d2t"] = torch.tensor(draft_ids, dtype=torch.int64) - torch.arange(Vd)
    if t2d:
        m = torch.zeros(V, dtype=torch.bool)
        m[torch.tensor(draft_ids)] = True
        t["t2d"] = m
    if own_embed:
        t["embed_tokens.weight"] = torch.randn(V, H, generator=g)
    return t


def mtp_config(target_cfg, key):
    c = dict(target_cfg)
    c[key] = 1
    return c


def mtp_tensors(g, layout, V, L=6):
    mf = _mf()
    H = 32
    if layout == "mtp":
        t = {"mtp.fc.weight": mf.lin(g, H, 2 * H), "mtp.pre_fc_norm_embedding.weight": mf.normw(g, H),
             "mtp.pre_fc_norm_hidden.weight": mf.normw(g, H), "mtp.norm.weight": mf.normw(g, H)}
        t.update(mf.layer_tensors(g, "mtp.layers.0.", H, 64, 4, 2, 16, True))
        return t
    p = f"model.layers.{L}."
    t = {p + "eh_proj.weight": mf.lin(g, H, 2 * H), p + "enorm.weight": mf.normw(g, H),
         p + "hnorm.weight": mf.normw(g, H), p + "shared_head.norm.weight": mf.normw(g, H),
         p + "shared_head.head.weight": torch.randn(V, H, generator=g)}
    t.update(mf.layer_tensors(g, p, H, 64, 4, 2, 16, True))
    return t


def train_chain(tgt, cfg, tensors, seed, steps):
    """Teacher-forced training of the chain drafter (the EAGLE objective with UNROLL steps of
    training-time test): context = the target's taps and tokens up to the anchor row a, then
    step k (token seq[a+k], the previous step's fed-back hidden) predicts seq[a+k+1]."""
    if steps <= 0:
        return tensors
    from chain_ref import ChainConfig
    g = torch.Generator().manual_seed(seed + 77)
    ccfg = ChainConfig.from_dict(cfg, tgt.cfg.num_hidden_layers)
    seqs = []
    for _ in range(_mf().TRAIN_SEQS):
        pr = torch.randint(0, 94, (5,), generator=g).tolist()
        seq = pr + greedy_generate(tgt, pr, 40)[0]
        if len(seq) >= 16:
            seqs.append(seq)
    feats = [tgt.forward(s_, tap_layers=ccfg.target_layer_ids)[1] for s_ in seqs]
    train = {k: v.clone().requires_grad_(v.is_floating_point()) for k, v in tensors.items()}
    dr = ChainDrafter(ccfg, train, tgt)
    opt = torch.optim.Adam([v for v in train.values() if v.requires_grad], lr=3e-3)
    for step in range(steps):
        opt.zero_grad()
        si = int(torch.randint(0, len(seqs), (1,), generator=g))
        seq, f = seqs[si], feats[si]
        loss = 0.0
        anchors = torch.randint(2, len(seq) - UNROLL - 1, (4,), generator=g).tolist()
        for a in anchors:
            ctx = dr.new_context()
            dr.add_context(ctx, f[:a + 1].detach(), seq[:a + 1], list(range(a + 1)))
            pos, pfeat = ctx.pending
            gh = dr._first_hidden(pfeat)
            kc, vc = ctx.k, ctx.v
            for k in range(1, UNROLL + 1):
                logits, fb, kk, vv = dr._row(seq[a + k], gh, pos, kc, vc)
                kc = kk if kc is None else torch.cat([kc, kk], 1)
                vc = vv if vc is None else torch.cat([vc, vv], 1)
                ce = torch.nn.functional.cross_entropy(logits[None], torch.tensor([seq[a + k + 1]]))
                if torch.isfinite(ce):
                    loss = loss + ce * math.exp(-(k - 1) / 2) / len(anchors)
                gh, pos = fb, pos + 1
        if not torch.is_tensor(loss):  # every next token outside the draft vocabulary
            continue
        loss.backward()
        opt.step()
        if step % 60 == 0 or step == steps - 1:
            print(f"    train step {step} loss {float(loss):.3f}")
    return {k: v.detach().clone() for k, v in train.items()}


def chain_golden(name, cfg, make, seed, target_name, steps):
    """Writes the fixture and its golden.json; returns the smallest greedy margin."""
    mf = _mf()
    path = os.path.join(mf.DATA, name)
    shutil.rmtree(path, ignore_errors=True)
    tgt = Target.from_dir(os.path.join(mf.DATA, target_name))
    tens = train_chain(tgt, cfg, make(torch.Generator().manual_seed(seed)), seed, steps)
    save_hf_dir(path, cfg, tens)
    dr = ChainDrafter.from_dir(path, tgt)
    kind, B, V = dr.cfg.kind, 8, tgt.cfg.vocab_size
    ctx_tokens = [t % V for t in mf.CONTEXT_TOKENS]
    if V < 96:
        ctx_tokens = [t % 14 for t in mf.CONTEXT_TOKENS]
    logits, taps = tgt.forward(ctx_tokens, tap_layers=dr.cfg.target_layer_ids)
    anchor = int(torch.argmax(logits[-1]))
    ctx = dr.new_context()
    dr.add_context(ctx, taps[:6], ctx_tokens[:6], list(range(6)))  # in two chunks: a pending row crosses
    dr.add_context(ctx, taps[6:], ctx_tokens[6:], list(range(6, 10)))
    picks, info = dr.draft_chain(ctx, anchor, B)
    m = dr.d2t
    rows = info["logits"][:, m]  # draft id order
    k = 4
    margins = list(info["margins"])
    margins += [float(r.sort(descending=True).values[k - 1] - r.sort(descending=True).values[k]) for r in rows]
    gold = {"target": target_name, "context_tokens": ctx_tokens, "anchor": anchor, "block_size": B,
            "tap_layers": dr.cfg.target_layer_ids, "layout": dr.layout, "draft_to_target": m.tolist(),
            "variants": {kind: {"logits": mf.r9(rows), "topk_ids": [topk_desc(r, k) for r in info["logits"]],
                                "picks": picks}}}
    if kind == "mtp":
        gold["feedback"] = dr.cfg.mtp_feedback
    prompt = mf.CYCLE_PROMPT if V >= 96 else [3, 1, 4, 1, 5]
    ar_out, st = speculative_generate(tgt, None, prompt, "ar", B, 40)
    margins.append(st["min_margin"])
    cyc = {"prompt": prompt, "max_new_tokens": 40, "block_size": B, "variants": {"ar": {"output": ar_out, "trace": []}}}
    o, st = speculative_generate(tgt, dr, prompt, kind, B, 40)
    assert o == ar_out, f"{name}: greedy speculative output != ar output"
    margins.append(st["min_margin"])
    cyc["variants"][kind] = {"output": o, "trace": st["trace"]}
    print(f"  {name}/{kind}: tau {st['tau']:.3f} cycles {st['cycles']} accept {[t['accepted'] for t in st['trace']]}")
    gold["cycle"] = cyc
    mf.dump(os.path.join(path, "golden.json"), gold)
    return min(margins), [t["accepted"] for t in st["trace"]]


def frequent_ids(tgt, n, seed):
    """the n target ids most often in greedy continuations (EAGLE-3's draft vocabulary), by id"""
    g = torch.Generator().manual_seed(seed)
    cnt = torch.zeros(tgt.cfg.vocab_size)
    for _ in range(24):
        pr = torch.randint(0, 94, (5,), generator=g).tolist()
        for t in pr + greedy_generate(tgt, pr, 40)[0]:
            cnt[t] += 1
    cnt += torch.rand(tgt.cfg.vocab_size, generator=g) * 0.01  # ties
    return sorted(torch.topk(cnt, n).indices.tolist())


def make_chain():
    mf = _mf()
    t96 = Target.from_dir(os.path.join(mf.DATA, "qwen3-f32-tied"))
    tcfg = dict(t96.cfg.raw)
    ids64 = frequent_ids(t96, 64, 4242)
    specs = [
        ("eagle3-f32", 12000, eagle3_config(96, 95, [1, 3, 4], 64),
         lambda g: eagle3_tensors(g, "midlayer.", 96, ids64, False), "qwen3-f32-tied", CHAIN_TRAIN_STEPS),
        ("eagle3-specul-f32", 13000, eagle3_config(96, 95, [2, 3, 5], 96, speculators=True, norm_before_residual=True),
         lambda g: eagle3_tensors(g, "layers.0.", 96, list(range(96)), True), "qwen3-f32-tied", CHAIN_TRAIN_STEPS),
        ("mtp-f32", 14000, mtp_config(tcfg, "mtp_num_hidden_layers"), lambda g: mtp_tensors(g, "mtp", 96),
         "qwen3-f32-tied", CHAIN_TRAIN_STEPS),
        ("mtp-deepseek-f32", 15000, mtp_config(tcfg, "num_nextn_predict_layers"),
         lambda g: mtp_tensors(g, "deepseek", 96), "qwen3-f32-tied", CHAIN_TRAIN_STEPS),
    ]
    t16 = Target.from_dir(os.path.join(mf.DATA, "qwen3-v16-f32"))
    specs += [
        ("eagle3-v16-f32", 16000, eagle3_config(16, 15, [1, 3, 5], 12),
         lambda g: eagle3_tensors(g, "midlayer.", 16, [3, 0, 15, 7, 1, 9, 12, 4, 2, 11, 5, 8], False, t2d=False),
         "qwen3-v16-f32", 0),
        ("mtp-v16-f32", 17000, mtp_config(dict(t16.cfg.raw), "mtp_num_hidden_layers"),
         lambda g: mtp_tensors(g, "mtp", 16), "qwen3-v16-f32", 0),
    ]
    for name, seed, cfg, make, target, steps in specs:
        while True:
            m, acc = chain_golden(name, cfg, make, seed, target, steps)
            mixed = steps == 0 or (max(acc) >= 2 and min(acc) < max(acc))
            print(f"{name}: seed {seed} min margin {m:.4g} mixed acceptance {mixed}")
            if m > mf.MIN_MARGIN and mixed:
                break
            seed += 1
