#!/usr/bin/python3
"""Self-checks of the reference (run after make_fixtures.py):

    /usr/bin/python3 scripts/reference/selftest.py [N]

1. KV-cache incremental decode == full forward, taps included (every target fixture).
2. Drafter: feeding the context in chunks == feeding it at once; B < block_size runs.
3. Greedy speculative output == ar output for every variant, several block sizes and prompts.
4. Lossless sampling: chi-square of (token1, token2) and of token3 from N speculative runs on the
   v16 pair against the exact target distributions in dflash2-v16-f32/golden.json, at T = 1 and
   with the filtered setting (T 0.8, top-p 0.9, top-k 8), selector on and off, and dspark, eagle3
   and mtp on their v16 fixtures (dspark-v16-f32, eagle3-v16-f32: a reduced draft vocabulary).
   Chain drafters (eagle3, mtp): context in chunks == at once, greedy == ar (item 2 and 3).
"""
import json
import math
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from qwen3_ref import Target  # noqa: E402
from dflash_ref import Drafter  # noqa: E402
from chain_ref import ChainDrafter  # noqa: E402
from cycle_ref import speculative_generate  # noqa: E402

torch.set_num_threads(1)
DATA = os.path.join(os.path.dirname(os.path.dirname(HERE)), "tests", "data")


def chi2_pvalue(obs, exp):
    """Pearson chi-square with cells of expected count < 5 pooled; Wilson-Hilferty p-value."""
    cells, o_acc, e_acc = [], 0.0, 0.0
    for o, e in sorted(zip(obs, exp), key=lambda x: x[1]):
        o_acc += o
        e_acc += e
        if e_acc >= 5:
            cells.append((o_acc, e_acc))
            o_acc = e_acc = 0.0
    if e_acc > 0 and cells:
        o, e = cells.pop()
        cells.append((o + o_acc, e + e_acc))
    stat = sum((o - e) ** 2 / e for o, e in cells)
    k = len(cells) - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return stat, k, 0.5 * math.erfc(z / math.sqrt(2))


def main():
    N = int(sys.argv[1]) if len(sys.argv) > 1 else 1500
    for name in ("qwen3-f32-tied", "qwen3-bf16-untied", "llama-f32", "qwen3-f32-sharded", "qwen3-v16-f32"):
        t = Target.from_dir(os.path.join(DATA, name))
        ids = [x % t.cfg.vocab_size for x in range(3, 17)]
        full_l, full_t = t.forward(ids, tap_layers=(0, 2, 5))
        c = t.new_cache()
        parts = [t.forward(ids[:4], c, tap_layers=(0, 2, 5))]
        parts += [t.forward([x], c, tap_layers=(0, 2, 5)) for x in ids[4:9]]
        parts.append(t.forward(ids[9:], c, tap_layers=(0, 2, 5)))
        e = max((torch.cat([p[0] for p in parts]) - full_l).abs().max().item(),
                (torch.cat([p[1] for p in parts]) - full_t).abs().max().item())
        assert e < 1e-4, (name, e)
        print(f"[ok] {name}: KV-cache decode == full forward (max err {e:.2e})")

    tgt = Target.from_dir(os.path.join(DATA, "qwen3-f32-tied"))
    for dname in ("dflash-v1-f32", "dflash2-f32", "dflash2-swa-f32", "dspark-f32"):
        dr = Drafter.from_dir(os.path.join(DATA, dname), tgt)
        ctx_ids = [5, 9, 30, 2, 44, 61, 7]
        _, taps = tgt.forward(ctx_ids, tap_layers=dr.cfg.target_layer_ids)
        variants = (["dspark"] if dr.cfg.dspark else ["dflash"] if dr.cfg.version == 1
                    else ["dflash", "selector-off", "conv-off", "dflash2"])
        for v in variants:
            a, b = dr.new_context(), dr.new_context()
            dr.add_context(a, taps, list(range(7)))
            for i in range(7):
                dr.add_context(b, taps[i:i + 1], [i])
            la = dr.draft_block(a, 3, 7, 8, v)["logits"]
            lb = dr.draft_block(b, 3, 7, 8, v)["logits"]
            assert (la - lb).abs().max() < 1e-4
            assert dr.draft_block(a, 3, 7, 4, v)["logits"].shape[0] == 3
            for B in (2, 4, 8, 16):
                for pr in ([1, 2, 3, 4, 5], [60, 61], [9]):
                    ar, _ = speculative_generate(tgt, None, pr, "ar", B, 30)
                    out, st = speculative_generate(tgt, dr, pr, v, B, 30)
                    assert out == ar, (dname, v, B, pr)
        try:
            dr.check_variant("dflash2")
            assert dr.cfg.version == 2
        except ValueError as ex:
            assert dr.cfg.version == 1
            print(f"[ok] {dname}: v1 refuses dflash2: {str(ex)[:80]}...")
        print(f"[ok] {dname}: chunked context == whole; greedy speculative == ar for {variants} x B 2/4/8/16")

    for dname in ("eagle3-f32", "eagle3-specul-f32", "mtp-f32", "mtp-deepseek-f32"):
        dr = ChainDrafter.from_dir(os.path.join(DATA, dname), tgt)
        ctx_ids = [5, 9, 30, 2, 44, 61, 7]
        _, taps = tgt.forward(ctx_ids, tap_layers=dr.cfg.target_layer_ids)
        a, b = dr.new_context(), dr.new_context()
        dr.add_context(a, taps, ctx_ids, list(range(7)))
        for i in range(7):
            dr.add_context(b, taps[i:i + 1], ctx_ids[i:i + 1], [i])
        pa, ia = dr.draft_chain(a, 3, 8)
        pb, ib = dr.draft_chain(b, 3, 8)
        m = dr.d2t  # the draft ids (the other target ids are -inf)
        assert pa == pb and (ia["logits"][:, m] - ib["logits"][:, m]).abs().max() < 1e-4
        for B in (2, 4, 8, 16):
            for pr in ([1, 2, 3, 4, 5], [60, 61], [9]):
                ar, _ = speculative_generate(tgt, None, pr, "ar", B, 30)
                out, st = speculative_generate(tgt, dr, pr, dr.cfg.kind, B, 30)
                assert out == ar, (dname, B, pr)
        print(f"[ok] {dname}: chunked context == whole; greedy {dr.cfg.kind} == ar x B 2/4/8/16")

    t16 = Target.from_dir(os.path.join(DATA, "qwen3-v16-f32"))
    d16 = Drafter.from_dir(os.path.join(DATA, "dflash2-v16-f32"), t16)
    ds16 = Drafter.from_dir(os.path.join(DATA, "dspark-v16-f32"), t16)  # draft vocabulary 12 of 16
    e16 = ChainDrafter.from_dir(os.path.join(DATA, "eagle3-v16-f32"), t16)  # draft vocabulary 12 of 16
    m16 = ChainDrafter.from_dir(os.path.join(DATA, "mtp-v16-f32"), t16)
    gold = json.load(open(os.path.join(DATA, "dflash2-v16-f32", "golden.json")))
    prompt = gold["prompt"]
    settings = [("T=1", 1.0, 1.0, 0, gold), ("filtered", 0.8, 0.9, 8, gold["filtered"])]
    for label, T, tp, tk, g in settings:
        p1 = torch.tensor(g["target_probs_first"], dtype=torch.float64)
        p2 = torch.tensor(g["target_probs_second_given_first"], dtype=torch.float64)
        p3 = torch.tensor(g["target_probs_third"], dtype=torch.float64)
        eos = t16.cfg.eos_token_ids[0]
        joint = (p1[:, None] * p2)
        joint[eos] = 0
        joint[eos, 0] = p1[eos]  # generation stops after a first-token EOS: one cell
        joint = joint.reshape(-1)
        for v, dd in (("selector-off", d16), ("dflash2", d16), ("dspark", ds16), ("eagle3", e16), ("mtp", m16)):
            c12 = torch.zeros(256)
            c3 = torch.zeros(16)
            acc = 0
            for s in range(N):
                out, st = speculative_generate(t16, dd, prompt, v, 4, 3, temperature=T, top_p=tp,
                                               top_k=tk, seed=(s * 2654435761 + 12345) % (1 << 62))
                assert len(out) == 3 or out[-1] in t16.cfg.eos_token_ids
                c12[out[0] * 16 + (out[1] if len(out) > 1 else 0)] += 1
                if len(out) == 3:
                    c3[out[2]] += 1
                acc += sum(tr["accepted"] for tr in st["trace"])
            s12, k12, pv12 = chi2_pvalue(c12.tolist(), (joint * N).tolist())
            n3 = float(c3.sum())
            # target_probs_third = P(t3 = z, t1 and t2 not EOS): condition on no EOS
            p3c = p3 / p3.sum()
            s3, k3, pv3 = chi2_pvalue(c3.tolist(), (p3c * n3).tolist())
            print(f"[{'ok' if min(pv12, pv3) > 1e-3 else 'FAIL'}] sampling {label} {v}: joint(t1,t2) chi2 {s12:.1f} "
                  f"df {k12} p {pv12:.3f}; t3 chi2 {s3:.1f} df {k3} p {pv3:.3f}; mean accepted/run {acc / N:.2f}")


if __name__ == "__main__":
    main()
