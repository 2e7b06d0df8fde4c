"""Independent reference of the speculative decoding loop (docs/architecture.md) and its
measurements (README, *Result files and their columns*).

API:
    output_ids, stats = speculative_generate(target, drafter, prompt_ids, variant, block_size,
                                             max_new_tokens, temperature=0.0, top_p=1.0, top_k=0,
                                             seed=0, recall_k=None)
    target: qwen3_ref.Target; drafter: dflash_ref.Drafter, or chain_ref.ChainDrafter for the chain
    variants "eagle3" / "mtp" (ignored / may be None for variant "ar").
    output_ids: the GENERATED ids only (prompt excluded), at most max_new_tokens, ending with the
    first EOS if one was produced (EOS is committed, then generation stops).

Loop:
  1. Prefill: the target runs over the prompt (positions 0..n-1) capturing the drafter's tap layers;
     the first new token comes from the target's last row (argmax at T=0, else a sample from
     filtered_probs).  The prompt's tap features become the drafter's context (positions 0..n-1).
  2. Cycle, anchor = last committed token at position P (not yet seen by the target):
     draft = drafter.draft_block(ctx, anchor, P, B, variant); picks = drafter.select(...)
     (eagle3 / mtp: picks = drafter.draft_chain(ctx, anchor, B, ...): B-1 sequential steps)
     target verifies [anchor, d_1..d_{B-1}] at P..P+B-1 with its KV cache.
     T == 0: a = leading run of d_t == argmax(target row t-1); bonus = argmax(target row a).
     T > 0: p_{t-1} = filtered_probs(target row t-1), q_t = the distribution d_t was drawn from;
       accept d_t if u < min(1, p(d_t)/q(d_t)); at the first rejection bonus ~ norm(max(p - q, 0))
       (falls back to p if that is all zero); all accepted: bonus ~ p_{B-1}.
     Commit d_1..d_a, bonus -- cut at max_new_tokens and after the first EOS.  Target KV is truncated
     to P+a+1, the tap features of verify rows 0..a (positions P..P+a) go to the drafter context,
     the bonus is the next anchor.
  "ar": prefill + one target step per token (greedy or sampled with the same filters).

Random numbers: one torch.Generator seeded with `seed`, consumed in this order: first token; per cycle
  the draft samples d_1..d_{B-1}, then per verified row one uniform, then the bonus draw.  (Sampled
  streams are NOT expected to match another implementation bit for bit; only greedy is.)

stats (dict):
  "trace": [{"pos": P, "draft": [d_1..d_{B-1}], "accepted": a, "bonus": id}] per cycle (a and bonus as
           verified, before any cut by max_new_tokens / EOS),
  "cycles", "committed" (= len(output_ids)), "target_steps" (= cycles + 1: prefill included;
           for "ar" = committed), "tau" = committed / target_steps,
  "mean_accept_len" = mean over cycles of a + 1,
  "per_position": {"drafted", "reached", "accepted", "conditional", "survival"} lists for
           positions i = 1..B-1 (reached_i = cycles where d_1..d_{i-1} were all accepted;
           conditional = accepted/reached, survival = accepted/cycles),
  "histogram": [count of cycles with a + 1 == L for L = 1..B], "histogram_share": same / cycles,
  "recall_k": k,
  "recall": {"top1_hits", "top1_reached", "topk_hits", "topk_reached", "recall@1", "recall@k"} per
           position: the target's token at position P+i is taken from the final committed sequence
           (in hindsight; identical to the target's own greedy continuation at T = 0); top-1 / top-k are
           of the drafter's row logits (dspark: of the corrected rows of the walk); position i is counted (reached) only where positions 1..i-1
           were all hits in the same sense and P+i lies inside the committed sequence,
  "min_margin" (T == 0 only): smallest top1 - top2 gap over every greedy decision taken (target rows
           used, drafter row argmax / selector score argmax, drafter top-k boundary) -- a tie check,
  "oracle_accept_len" = 1 + mean over cycles of the leading run of top-k hits (a perfect selector).
"""
import torch

from dflash_ref import filtered_probs, sample_from, topk_desc
from qwen3_ref import argmax_smallest


def _margin(row):
    v = torch.topk(row, 2).values
    return float(v[0] - v[1])


def _choose(row, temperature, top_p, top_k, gen):
    if temperature <= 0:
        return argmax_smallest(row)
    return sample_from(filtered_probs(row, temperature, top_p, top_k), gen)


def speculative_generate(target, drafter, prompt_ids, variant, block_size, max_new_tokens,
                         temperature=0.0, top_p=1.0, top_k=0, seed=0, recall_k=None):
    gen = torch.Generator().manual_seed(seed)
    prompt = [int(t) for t in prompt_ids]
    eos = set(target.cfg.eos_token_ids)
    B = int(block_size)
    stats = {"trace": []}
    if max_new_tokens <= 0:
        stats.update(cycles=0, committed=0, target_steps=0, tau=0.0)
        return [], stats
    cache = target.new_cache()
    taps_ids = tuple(drafter.cfg.target_layer_ids) if (variant != "ar" and drafter) else ()
    logits, taps = target.forward(prompt, cache, tap_layers=taps_ids)
    out = [_choose(logits[-1], temperature, top_p, top_k, gen)]

    def done():
        return out[-1] in eos or len(out) >= max_new_tokens

    if variant == "ar":
        margins = [_margin(logits[-1])]
        while not done():
            logits, _ = target.forward([out[-1]], cache)
            margins.append(_margin(logits[-1]))
            out.append(_choose(logits[-1], temperature, top_p, top_k, gen))
        stats.update(cycles=0, committed=len(out), target_steps=len(out), tau=1.0,
                     min_margin=min(margins) if temperature <= 0 else None)
        return out, stats

    chain = hasattr(drafter, "draft_chain")  # eagle3 / mtp (chain_ref.py)
    if chain and variant != drafter.cfg.kind:
        raise ValueError(f"variant {variant!r} needs a {variant} checkpoint; this one is {drafter.cfg.kind}")
    if not chain:
        drafter.check_variant(variant)
    ctx = drafter.new_context()
    if chain:
        drafter.add_context(ctx, taps, prompt, list(range(len(prompt))))
    else:
        drafter.add_context(ctx, taps, list(range(len(prompt))))
    stk = getattr(drafter.cfg, "selector_top_k", 0)
    rk = recall_k or (stk if stk > 0 else 4)
    margins = [_margin(logits[-1])] if temperature <= 0 else []
    row_top = []  # per cycle: (P, [top1 per row], [topk list per row])
    while not done():
        P = len(prompt) + len(out) - 1
        anchor = out[-1]
        assert cache.length == P
        if chain:
            picks, info = drafter.draft_chain(ctx, anchor, B, temperature, top_p, top_k, gen)
            rows = info["logits"]
        else:
            d = drafter.draft_block(ctx, anchor, P, B, variant)
            picks, info = drafter.select(d, anchor, variant, temperature, top_p, top_k, gen)
            rows = info.get("corrected", d["logits"])  # dspark: the corrected rows of the walk
        row_top.append((P, [topk_desc(r, 1)[0] for r in rows], [topk_desc(r, rk) for r in rows]))
        vlog, vtaps = target.forward([anchor] + picks, cache, tap_layers=taps_ids)
        a = 0
        bonus = None
        if temperature <= 0:
            while a < B - 1 and picks[a] == argmax_smallest(vlog[a]):
                a += 1
            bonus = argmax_smallest(vlog[a])
            margins.extend(_margin(vlog[t]) for t in range(a + 1))
            margins.extend(info["margins"])
        else:
            for t in range(1, B):
                p = filtered_probs(vlog[t - 1], temperature, top_p, top_k)
                q = info["q"][t - 1]
                dt = picks[t - 1]
                u = float(torch.rand((), generator=gen, dtype=torch.float64))
                if float(q[dt]) > 0 and u < min(1.0, float(p[dt]) / float(q[dt])):
                    a += 1
                    continue
                resid = torch.clamp(p - q, min=0)
                bonus = sample_from(resid if float(resid.sum()) > 0 else p, gen)
                break
            if bonus is None:
                bonus = sample_from(filtered_probs(vlog[B - 1], temperature, top_p, top_k), gen)
        stats["trace"].append({"pos": P, "draft": list(picks), "accepted": a, "bonus": bonus})
        for tok in picks[:a] + [bonus]:
            if done():
                break
            out.append(tok)
        cache.truncate(P + a + 1)
        if chain:  # the verified rows' own tokens: the anchor, then the accepted drafts
            drafter.add_context(ctx, vtaps[: a + 1], [anchor] + picks[:a], list(range(P, P + a + 1)))
        else:
            drafter.add_context(ctx, vtaps[: a + 1], list(range(P, P + a + 1)))

    # ---- measurements ----
    n = B - 1
    cyc = len(stats["trace"])
    drafted = [cyc] * n
    reached = [0] * n
    accepted = [0] * n
    hist = [0] * B
    for tr in stats["trace"]:
        a = tr["accepted"]
        hist[a] += 1
        for i in range(n):
            if i <= a:
                reached[i] += 1
            if i < a:
                accepted[i] += 1
    full = prompt + out
    t1h, t1r, tkh, tkr = [0] * n, [0] * n, [0] * n, [0] * n
    oracle_sum = 0
    for P, top1, topk in row_top:
        ok1 = okk = True
        run = 0
        for i in range(n):
            if P + i + 1 >= len(full):
                break
            truth = full[P + i + 1]
            if ok1:
                t1r[i] += 1
                if truth == top1[i]:
                    t1h[i] += 1
                else:
                    ok1 = False
            if okk:
                tkr[i] += 1
                if truth in topk[i]:
                    tkh[i] += 1
                    run += 1
                else:
                    okk = False
        oracle_sum += run

    def ratio(x, y):
        return [xi / yi if yi else 0.0 for xi, yi in zip(x, y)]

    stats.update(
        cycles=cyc, committed=len(out), target_steps=cyc + 1, tau=len(out) / (cyc + 1),
        mean_accept_len=(sum(t["accepted"] + 1 for t in stats["trace"]) / cyc) if cyc else 0.0,
        per_position={"drafted": drafted, "reached": reached, "accepted": accepted,
                      "conditional": ratio(accepted, reached),
                      "survival": ratio(accepted, [cyc] * n)},
        histogram=hist, histogram_share=[h / cyc if cyc else 0.0 for h in hist],
        recall_k=rk,
        recall={"top1_hits": t1h, "top1_reached": t1r, "topk_hits": tkh, "topk_reached": tkr,
                "recall@1": ratio(t1h, t1r), "recall@k": ratio(tkh, tkr)},
        oracle_accept_len=(1 + oracle_sum / cyc) if cyc else 0.0,
        min_margin=min(margins) if margins else None,
    )
    return out, stats
