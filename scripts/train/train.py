"""Target pre-training, self-distillation data generation and joint DFlash / DFlash 2 drafter training."""
import math
import random
import time

import torch
import torch.nn.functional as F

from models import DFlashDrafter, Qwen3Target, count_params

AUTOCAST = dict(device_type="cpu", dtype=torch.bfloat16)


def log(msg, fh=None):
    line = time.strftime("%H:%M:%S ") + msg
    print(line, flush=True)
    if fh:
        fh.write(line + "\n")
        fh.flush()


def lr_at(step, total, peak, warmup, floor=0.1):
    if step < warmup:
        return peak * (step + 1) / warmup
    p = min(1.0, (step - warmup) / max(1, total - warmup))
    return peak * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * p)))


def steps_from_budget(step_fn, budget_s, probe=8):
    """Run `probe` steps, time them, return (total_steps, time_per_step)."""
    t0 = time.time()
    for i in range(probe):
        step_fn(i, probe * 1000)  # warm-up lr schedule placeholder (tiny lr from warmup)
    dt = (time.time() - t0) / probe
    return max(probe + 1, int(budget_s / dt)), dt


# ------------------------------------------------------------------------------------ target
def train_target(cfg, tokens, budget_s, seed, seq_len=256, batch=32, peak_lr=3e-3, logf=None, steps=None):
    torch.manual_seed(seed)
    model = Qwen3Target(cfg)
    log(f"target params {count_params(model)}", logf)
    n_seq = (len(tokens) - 1) // seq_len
    data = torch.tensor(tokens[: n_seq * seq_len + 1], dtype=torch.long)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    nodecay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.05}, {"params": nodecay, "weight_decay": 0.0}],
                            lr=peak_lr, betas=(0.9, 0.95))
    g = torch.Generator().manual_seed(seed)
    state = {"total": None, "loss": None}

    def step(i, total):
        idx = torch.randint(0, n_seq, (batch,), generator=g) * seq_len
        x = torch.stack([data[j: j + seq_len] for j in idx.tolist()])
        y = torch.stack([data[j + 1: j + seq_len + 1] for j in idx.tolist()])
        for pg in opt.param_groups:
            pg["lr"] = lr_at(i, total, peak_lr, 100)
        with torch.autocast(**AUTOCAST):
            logits, _ = model(x)
        loss = F.cross_entropy(logits.float().view(-1, logits.shape[-1]), y.view(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        return loss.item()

    t0 = time.time()
    probe = 10
    losses = []
    for i in range(probe):
        losses.append(step(i, 10 ** 9))
    dt = (time.time() - t0) / probe
    total = steps or max(probe + 1, int(budget_s / dt))
    log(f"target: {dt:.3f}s/step -> {total} steps ({total * batch * seq_len / 1e6:.1f}M tokens, "
        f"{len(tokens) / 1e6:.1f}M in stream)", logf)
    ema = losses[-1]
    for i in range(probe, total):
        l = step(i, total)
        ema = 0.98 * ema + 0.02 * l
        if i % 100 == 0 or i == total - 1:
            log(f"target step {i}/{total} loss {l:.3f} ema {ema:.3f} {time.time() - t0:.0f}s", logf)
    info = {"steps": total, "batch": batch, "seq_len": seq_len, "tokens_seen": total * batch * seq_len,
            "wall_s": round(time.time() - t0, 1), "final_loss_ema": round(ema, 4), "peak_lr": peak_lr,
            "params": count_params(model)}
    return model, info


# ------------------------------------------------------------------------------------ generation
def _pick(logits, temperature, gen):
    if temperature <= 0:
        return logits.argmax(-1)
    p = torch.softmax(logits.float() / temperature, -1)
    return torch.multinomial(p, 1, generator=gen).squeeze(-1)


@torch.no_grad()
def generate(target, prompts, max_new, temperature, seed, stop_ids):
    """Batched generation with a KV cache and left padding.  Returns list of new-token lists
    (up to and including the first stop token)."""
    b = len(prompts)
    T = max(len(p) for p in prompts)
    ids = torch.zeros(b, T, dtype=torch.long)
    valid = torch.zeros(b, T, dtype=torch.bool)
    for i, p in enumerate(prompts):
        ids[i, T - len(p):] = torch.tensor(p)
        valid[i, T - len(p):] = True
    pos = (valid.long().cumsum(1) - 1).clamp(min=0)
    gen = torch.Generator().manual_seed(seed)
    cache = []
    with torch.autocast(**AUTOCAST):
        logits, _ = target(ids, pos, cache, key_valid=valid)
    nxt = _pick(logits[:, -1].float(), temperature, gen)
    out = [[] for _ in range(b)]
    done = torch.zeros(b, dtype=torch.bool)
    last = pos[:, -1]
    stop = torch.tensor(sorted(stop_ids))
    for t in range(max_new):
        for i in range(b):
            if not done[i]:
                out[i].append(int(nxt[i]))
        done = done | torch.isin(nxt, stop)
        if bool(done.all()) or t == max_new - 1:
            break
        last = last + 1
        valid = torch.cat([valid, torch.ones(b, 1, dtype=torch.bool)], 1)
        with torch.autocast(**AUTOCAST):
            logits, _ = target(nxt.unsqueeze(1), last.unsqueeze(1), cache, key_valid=valid)
        nxt = _pick(logits[:, -1].float(), temperature, gen)
    return out


def distill_data(target, prompts, max_new, stop_ids, seed, batch=192, logf=None):
    """prompts: list of (family, ids, temperature); temperature 0 = greedy.  Returns list of dicts
    {ids, plen, greedy, family} (prompt + continuation up to and including the first stop token)."""
    seqs = []
    t0 = time.time()
    for temp in sorted({p[2] for p in prompts}):
        order = sorted((i for i, p in enumerate(prompts) if p[2] == temp), key=lambda i: len(prompts[i][1]))
        for bi in range(0, len(order), batch):
            chunk = order[bi: bi + batch]
            outs = generate(target, [prompts[i][1] for i in chunk], max_new, temp, seed + bi, stop_ids)
            for i, o in zip(chunk, outs):
                seqs.append({"ids": prompts[i][1] + o, "plen": len(prompts[i][1]), "greedy": temp == 0.0,
                             "family": prompts[i][0]})
            log(f"distill T={temp} {len(seqs)}/{len(prompts)} {time.time() - t0:.0f}s", logf)
    return seqs


# ------------------------------------------------------------------------------------ drafters
def make_batch(seqs, target, taps, n_anchor, B, mask_id, gen):
    S = max(len(s["ids"]) for s in seqs)
    b = len(seqs)
    ids = torch.zeros(b, S + B, dtype=torch.long)
    lens = torch.tensor([len(s["ids"]) for s in seqs])
    for i, s in enumerate(seqs):
        ids[i, : len(s["ids"])] = torch.tensor(s["ids"])
    anchors = torch.zeros(b, n_anchor, dtype=torch.long)
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
    feats = feats.detach()
    off = torch.arange(B)
    pos = anchors.unsqueeze(-1) + off  # [b,N,B]
    tok = torch.gather(ids, 1, pos.view(b, -1)).view(b, n_anchor, B)
    inside = (pos < lens.view(b, 1, 1)) & avalid.unsqueeze(-1)
    labels = tok[:, :, 1:].masked_fill(~inside[:, :, 1:], -100)
    block_ids = torch.full_like(tok, mask_id)
    block_ids[:, :, 0] = tok[:, :, 0]
    prev = tok[:, :, :-1]
    return feats, block_ids, anchors, labels, prev


def drafter_losses(drafter, target, feats, block_ids, anchors, labels, prev, gamma, topk):
    E = target.model.embed_tokens.weight.detach()
    B = block_ids.shape[-1]
    with torch.autocast(**AUTOCAST):
        y = drafter(feats, None, F.embedding(block_ids, E), anchors)
        logits = drafter.logits(y[:, :, 1:], E)
    if drafter.dspark:  # teacher forcing: row k's predecessor is the true token at row k-1
        logits = logits + drafter.markov_head(prev)
    V = logits.shape[-1]
    w = torch.exp(-(torch.arange(1, B, dtype=torch.float32) - 1) / gamma).view(1, 1, B - 1)
    valid = labels >= 0
    ce = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1).clamp(min=0), reduction="none").view(labels.shape)
    wv = w * valid
    base = (ce * wv).sum() / wv.sum()
    out = {"base": base}
    with torch.no_grad():
        am = logits.argmax(-1)
        out["acc1"] = ((am == labels) & valid).sum().float() / valid.sum()
    if drafter.v2:
        U, C = logits.detach().topk(topk, dim=-1)
        sc = drafter.candidate_selector.scores(U, C, prev, y[:, :, 1:].float())
        hit = (C == labels.unsqueeze(-1))
        has = hit.any(-1) & valid
        tgt = hit.float().argmax(-1)
        sce = F.cross_entropy(sc.reshape(-1, topk), tgt.reshape(-1), reduction="none").view(labels.shape)
        ws = w * has
        out["sel"] = (sce * ws).sum() / ws.sum().clamp(min=1)
        with torch.no_grad():
            pick = torch.gather(C, -1, sc.argmax(-1, keepdim=True)).squeeze(-1)
            out["sel_acc"] = ((pick == labels) & has).sum().float() / has.sum().clamp(min=1)
        out["total"] = base + out["sel"]
    else:
        out["total"] = base
    return out


@torch.no_grad()
def block_tau(drafter, target, seqs, taps, B, mask_id, topk, use_selector=True, use_conv=True, n_anchor=24, seed=0):
    """Greedy acceptance estimate on greedy-generated sequences: in such a sequence x_{a+k} is
    exactly the target's argmax, so a block's acceptance is 1 + the leading run of correct
    drafts (selector walk from the anchor for DFlash 2)."""
    gen = torch.Generator().manual_seed(seed)
    E = target.model.embed_tokens.weight
    tot, cyc = 0.0, 0
    per_pos = torch.zeros(B - 1)
    for bi in range(0, len(seqs), 16):
        ch = seqs[bi: bi + 16]
        feats, block_ids, anchors, labels, prev = make_batch(ch, target, taps, n_anchor, B, mask_id, gen)
        with torch.autocast(**AUTOCAST):
            y = drafter(feats, None, F.embedding(block_ids, E), anchors, use_conv=use_conv)
            logits = drafter.logits(y[:, :, 1:], E)
        if drafter.v2 and use_selector:
            U, C = logits.float().topk(topk, dim=-1)
            g = drafter.candidate_selector.hidden_projection(y[:, :, 1:].float()).float()
            A = drafter.candidate_selector.predecessor_codebook.float()
            Bc = drafter.candidate_selector.successor_codebook.float()
            p = block_ids[:, :, 0]
            picks = []
            for t in range(B - 1):
                s = U[:, :, t] + ((A[p] * g[:, :, t]).unsqueeze(-2) * Bc[C[:, :, t]]).sum(-1)
                p = torch.gather(C[:, :, t], -1, s.argmax(-1, keepdim=True)).squeeze(-1)
                picks.append(p)
            d = torch.stack(picks, -1)
        elif drafter.dspark:
            p = block_ids[:, :, 0]
            picks = []
            for t in range(B - 1):
                p = (logits[:, :, t].float() + drafter.markov_head(p).float()).argmax(-1)
                picks.append(p)
            d = torch.stack(picks, -1)
        else:
            d = logits.argmax(-1)
        full = (labels[:, :, -1] >= 0)  # the whole block lies inside the sequence
        ok = (d == labels).long().cumprod(-1)
        sel = full & (anchors >= 0)
        for i, s in enumerate(ch):
            sel[i] &= s["greedy"]
        if sel.sum() == 0:
            continue
        tot += float((ok.sum(-1) + 1)[sel].sum())
        per_pos += ok[sel].float().sum(0)
        cyc += int(sel.sum())
    return (tot / max(cyc, 1)), (per_pos / max(cyc, 1)).tolist(), cyc


def train_drafters(cfgs, target, seqs, val_seqs, seed, steps, B=16, gamma=7.0, batch=16, n_anchor=32,
                   peak_lr=2e-3, markov_rank=8, logf=None, ckpt=None, deadline=None, ckpt_every=50):
    """Trains the DFlash (v1), DFlash 2 (v2) and DSpark (v1 backbone + Markov head) drafters jointly:
    same batches, same anchors, same target features, same number of steps, same initial backbone.

    ckpt: path of a resumable checkpoint (models, optimizers, data order and every RNG state), written
    every ckpt_every steps and when `deadline` (a time.time() value) passes; an existing one is resumed.
    Returns (models dict, info) or (None, info) when the deadline stopped training early."""
    import os
    torch.manual_seed(seed)
    taps = cfgs["v1"]["dflash_config"]["target_layer_ids"]
    mask_id = cfgs["v1"]["dflash_config"]["mask_token_id"]
    topk = cfgs["v2"]["dflash_config"]["selector_top_k"]
    d1 = DFlashDrafter(cfgs["v1"], v2=False)
    torch.manual_seed(seed)
    d2 = DFlashDrafter(cfgs["v2"], v2=True)
    torch.manual_seed(seed)
    d3 = DFlashDrafter(cfgs["dspark"], v2=False, markov_rank=markov_rank)
    # same initial shared weights for a fair comparison
    sd1 = d1.state_dict()
    d2.load_state_dict({**d2.state_dict(), **sd1})
    d3.load_state_dict({**d3.state_dict(), **sd1})
    models = {"v1": d1, "v2": d2, "dspark": d3}
    log("drafter params " + " ".join(f"{k} {count_params(m)}" for k, m in models.items()), logf)
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
            raise SystemExit(f"{ckpt}: a checkpoint of a different run ({c['steps']} steps, {c['n_seqs']} "
                             f"sequences; this run: {steps}, {len(seqs)}); remove it to start over")
        for k, m in models.items():
            m.load_state_dict(c["models"][k])
            opts[k].load_state_dict(c["opts"][k])
        gen.set_state(c["gen"])
        rng.setstate(c["rng"])
        torch.set_rng_state(c["torch_rng"])
        st = c["st"]
        log(f"drafters: resumed at step {st['step']}/{steps} from {ckpt}", logf)

    def save():
        if not ckpt:
            return
        tmp = ckpt + ".tmp"
        torch.save({"steps": steps, "n_seqs": len(seqs), "st": st, "gen": gen.get_state(), "rng": rng.getstate(),
                    "torch_rng": torch.get_rng_state(),
                    "models": {k: m.state_dict() for k, m in models.items()},
                    "opts": {k: o.state_dict() for k, o in opts.items()}}, tmp)
        os.replace(tmp, ckpt)

    def next_batch():
        if len(st["order"]) < batch:
            st["order"] = st["order"] + rng.sample(range(len(seqs)), len(seqs))
        ch, st["order"] = st["order"][:batch], st["order"][batch:]
        return [seqs[i] for i in ch]

    def step(i):
        feats, block_ids, anchors, labels, prev = make_batch(next_batch(), target, taps, n_anchor, B, mask_id, gen)
        res = {}
        for k, m in models.items():
            for pg in opts[k].param_groups:
                pg["lr"] = lr_at(i, steps, peak_lr, 50)
            out = drafter_losses(m, target, feats, block_ids, anchors, labels, prev, gamma, topk)
            opts[k].zero_grad(set_to_none=True)
            out["total"].backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0)
            opts[k].step()
            res[k] = {n: float(v) for n, v in out.items()}
        return res

    t0 = time.time() - st["wall_s"]
    while st["step"] < steps:
        i = st["step"]
        r = step(i)
        cur = {"v1": r["v1"]["base"], "v2": r["v2"]["base"], "sel": r["v2"]["sel"], "dspark": r["dspark"]["base"]}
        st["ema"] = cur if st["ema"] is None else {k: 0.98 * st["ema"][k] + 0.02 * v for k, v in cur.items()}
        st["step"] = i + 1
        st["wall_s"] = time.time() - t0
        ema = st["ema"]
        if i % 25 == 0 or i == steps - 1:
            log(f"drafter step {i}/{steps} v1 {cur['v1']:.3f} (ema {ema['v1']:.3f}) v2 {cur['v2']:.3f} "
                f"(ema {ema['v2']:.3f} acc1 {r['v2']['acc1']:.3f}) sel {cur['sel']:.3f} dspark {cur['dspark']:.3f} "
                f"(ema {ema['dspark']:.3f} acc1 {r['dspark']['acc1']:.3f}) {st['wall_s']:.0f}s", logf)
        if i % 250 == 0 and i > 0:
            vt = {k: round(block_tau(m, target, val_seqs[:64], taps, B, mask_id, topk)[0], 3) for k, m in models.items()}
            st["val"].append({"step": i, **vt})
            log(f"  val block-tau {vt}", logf)
        if st["step"] % ckpt_every == 0 or st["step"] == steps:
            save()
        if deadline and time.time() > deadline and st["step"] < steps:
            save()
            log(f"drafters: time budget spent at step {st['step']}/{steps}; checkpoint {ckpt}; rerun to resume", logf)
            return None, {"stopped_at": st["step"]}
    ema = st["ema"]
    info = {"steps": steps, "batch_sequences": batch, "anchors_per_sequence": n_anchor, "block_size": B,
            "gamma": gamma, "peak_lr": peak_lr, "markov_rank": markov_rank, "wall_s": round(st["wall_s"], 1),
            "val_block_tau_during_training": st["val"],
            "final_loss_ema": {"dflash_v1_base": round(ema["v1"], 4), "dflash2_base": round(ema["v2"], 4),
                               "dflash2_selector": round(ema["sel"], 4), "dspark_base": round(ema["dspark"], 4)},
            "params": {k: count_params(m) for k, m in models.items()}}
    return models, info
