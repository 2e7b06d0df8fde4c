#!/usr/bin/python3
"""Evaluate the exported model pair with the independent reference cycle (scripts/reference/cycle_ref.py).

Per prompt family (math, code, chat; generated prompts, fixed seed) and variant: tau (committed /
target steps, prefill counted as a step, as cycle_ref defines it), mean acceptance length per cycle,
per-position conditional acceptance, recall@1 / recall@16 per position, and the share of repeated
4-grams in the target's greedy outputs.  Writes models/eval.json, models/eval-golden.json and the
README.md model cards.
"""
import argparse
import json
import os
import random
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))

import torch  # noqa: E402

import corpus  # noqa: E402
from bpe import Tokenizer  # noqa: E402

B = 16
VARIANTS = {"tiny-qwen3-dflash-b16": ["dflash"],
            "tiny-qwen3-dflash2-b16": ["dflash2", "selector-off", "conv-off"]}


def family_prompts(n, seed):
    rng = random.Random(seed)
    fam = {"math": [corpus.chat_prompt(q) for q, _ in corpus.math_samples(n, seed + 1000)],
           "code": [corpus.chat_prompt(q) for q, _ in corpus.code_samples("eval", seed + 1001, n)]}
    chat = corpus.chat_samples()
    rng.shuffle(chat)
    fam["chat"] = [corpus.chat_prompt(q) for q, _ in chat[:n]]
    return fam


def rep4(ids):
    g = [tuple(ids[i:i + 4]) for i in range(len(ids) - 3)]
    return (1 - len(set(g)) / len(g)) if g else 0.0


def _sum_lists(acc, x):
    return [a + b for a, b in zip(acc, x)] if acc else list(x)


def run_eval(models_dir, n_prompts, seed, max_new, logf=print):
    from qwen3_ref import Target
    from dflash_ref import Drafter
    from cycle_ref import speculative_generate
    tok = Tokenizer(os.path.join(models_dir, "tiny-qwen3", "tokenizer.json"))
    target = Target.from_dir(os.path.join(models_dir, "tiny-qwen3"))
    drafters = {d: Drafter.from_dir(os.path.join(models_dir, d), target) for d in VARIANTS}
    fams = family_prompts(n_prompts, seed)
    res = {"max_new_tokens": max_new, "block_size": B, "temperature": 0.0, "prompts_per_family": n_prompts,
           "seed": seed, "families": {}}
    golden = {"description": "Greedy (T=0) block-16 speculative decoding with the reference cycle "
                             "(scripts/reference/cycle_ref.py). tau = committed / target steps (prefill counted).",
              "block_size": B, "temperature": 0.0, "max_new_tokens": max_new, "families": {}}
    for fam, texts in fams.items():
        prompts = [tok.encode(t) for t in texts]
        fr = {"variants": {}}
        greedy_outs = None
        for dname, variants in VARIANTS.items():
            for v in variants:
                t0 = time.time()
                comm = steps = cyc = 0
                acc_len = 0.0
                reached = accepted = r1h = r1r = rkh = rkr = None
                outs = []
                golden_stats = None
                for pi, p in enumerate(prompts):
                    out, st = speculative_generate(target, drafters[dname], p, v, B, max_new, 0.0, 1.0, 0, seed,
                                                   recall_k=16)
                    outs.append(out)
                    comm += st["committed"]
                    steps += st["target_steps"]
                    cyc += st["cycles"]
                    acc_len += st["mean_accept_len"] * st["cycles"]
                    reached = _sum_lists(reached, st["per_position"]["reached"])
                    accepted = _sum_lists(accepted, st["per_position"]["accepted"])
                    rc = st["recall"]
                    r1h = _sum_lists(r1h, rc["top1_hits"])
                    r1r = _sum_lists(r1r, rc["top1_reached"])
                    rkh = _sum_lists(rkh, rc["topk_hits"])
                    rkr = _sum_lists(rkr, rc["topk_reached"])
                    if pi == 0:
                        golden_stats = {"tau": st["tau"], "mean_accept_len": st["mean_accept_len"],
                                        "cycles": st["cycles"], "committed": st["committed"],
                                        "accepted_per_cycle": [t["accepted"] for t in st["trace"]],
                                        "output_ids": out, "min_margin": st.get("min_margin")}
                key = v if dname == "tiny-qwen3-dflash2-b16" else "dflash-v1"
                if dname == "tiny-qwen3-dflash2-b16" and v == "dflash":
                    key = "dflash2-ckpt-as-dflash"
                ratio = lambda x, y: [round(a / b, 4) if b else 0.0 for a, b in zip(x, y)]  # noqa: E731
                fr["variants"][key] = {
                    "drafter": dname, "variant": v, "tau": round(comm / steps, 4),
                    "mean_accept_len": round(acc_len / max(cyc, 1), 4), "cycles": cyc, "committed": comm,
                    "conditional_acceptance": ratio(accepted, reached),
                    "recall@1": ratio(r1h, r1r), "recall@16": ratio(rkh, rkr),
                    "wall_s": round(time.time() - t0, 1)}
                if greedy_outs is None:
                    greedy_outs = outs
                else:
                    fr.setdefault("lossless_mismatch", 0)
                    fr["lossless_mismatch"] += sum(o != g for o, g in zip(outs, greedy_outs))
                golden["families"].setdefault(fam, {"prompt_text": texts[0], "prompt_ids": prompts[0],
                                                    "variants": {}})
                golden["families"][fam]["variants"][key] = golden_stats
                logf(f"eval {fam} {key}: tau {comm / steps:.3f} accept_len {acc_len / max(cyc, 1):.3f} "
                     f"({time.time() - t0:.0f}s)")
        fr["greedy_rep4_share"] = round(sum(rep4(o) for o in greedy_outs) / len(greedy_outs), 4)
        fr["greedy_mean_len"] = round(sum(len(o) for o in greedy_outs) / len(greedy_outs), 1)
        fr["example_prompt"] = texts[0]
        fr["example_output"] = tok.decode(greedy_outs[0])
        res["families"][fam] = fr
    return res, golden


def _fmt(xs, n=8):
    return " ".join(f"{x:.2f}" for x in xs[:n])


def write_cards(models_dir, res, build):
    V = build["versions"]
    vers = "\n".join(f"- `{k}` {v}" for k, v in V.items())
    t = build["target"]
    d = build["drafters"]
    cfgs = {n: json.load(open(os.path.join(models_dir, n, "config.json")))
            for n in ("tiny-qwen3", "tiny-qwen3-dflash-b16", "tiny-qwen3-dflash2-b16")}
    fams = res["families"]
    head = ("| family | variant | tau | accept len/cycle | repeated 4-grams (greedy) |\n|---|---|---|---|---|\n")
    rows = ""
    for fam, fr in fams.items():
        for k, v in fr["variants"].items():
            rows += f"| {fam} | {k} | {v['tau']:.3f} | {v['mean_accept_len']:.3f} | {fr['greedy_rep4_share']:.3f} |\n"
    table = head + rows
    pp = ""
    for fam, fr in fams.items():
        for k in ("dflash2", "dflash-v1"):
            v = fr["variants"][k]
            pp += (f"- {fam} / {k}: conditional acceptance pos 1-8: {_fmt(v['conditional_acceptance'])}; "
                   f"recall@1: {_fmt(v['recall@1'])}; recall@16: {_fmt(v['recall@16'])}\n")
    bars = []
    m = fams["math"]["variants"]
    bars.append(f"- math tau(dflash2) = {m['dflash2']['tau']:.3f} (bar 4.0: "
                f"{'met' if m['dflash2']['tau'] >= 4.0 else 'MISSED by %.3f' % (4.0 - m['dflash2']['tau'])})")
    for fam, fr in fams.items():
        a, b = fr["variants"]["dflash2"]["tau"], fr["variants"]["dflash-v1"]["tau"]
        bars.append(f"- {fam}: tau(dflash2) {a:.3f} vs tau(dflash v1) {b:.3f}: "
                    f"{'met' if a > b else 'MISSED by %.3f' % (b - a)}")
    if any("MISSED" in b for b in bars):
        bars.append(
            f"\nWhat was tried / why: the drafters were trained for only {d['steps']} joint steps "
            f"({d['wall_s'] / 60:.1f} min on 2 shared CPU cores) on {build['distill_sequences']} self-distilled "
            f"sequences, and the target for {t['steps']} steps; training loss was still falling at the end. "
            f"The held-out teacher-forced block estimate above gives the drafter's ceiling under this budget. "
            f"Longer drafter training (`--drafter-minutes`), more distillation prompts (`--distill-prompts`) "
            f"or more anchors per sequence are the levers.")
    bars = "\n".join(bars)
    evalnote = (f"Evaluation: `scripts/train/evaluate.py`, reference cycle `scripts/reference/cycle_ref.py`, "
                f"greedy (T=0), block {B}, {res['prompts_per_family']} prompts per family, "
                f"max_new_tokens {res['max_new_tokens']}, seed {res['seed']}. tau = committed tokens / target "
                f"steps (prefill counted as a step); accept len/cycle = mean of a+1 over verify cycles. "
                f"Prompts: math = freshly generated word problems (unseen numbers), code = requests for stdlib "
                f"functions from held-out modules, chat = WordNet / fortune / Python-docs requests.\n")
    data = (f"Data: text installed by Debian packages (versions at build time):\n\n{vers}\n\n"
            f"plus arithmetic word problems with step-by-step solutions from our own generator "
            f"(`scripts/train/corpus.py`). Nothing of the corpus is stored in the repository.\n")
    rebuild = "Rebuild: `scripts/train/build_all` (fixed seeds; about 60-90 min on 2 CPU cores).\n"
    tc = cfgs["tiny-qwen3"]
    card_t = f"""# tiny-qwen3

A tiny Qwen3-architecture causal LM (q/k RMSNorm, GQA, neox RoPE, SwiGLU, tied embeddings) built for
the dflash-bench test and demo pair. It is NOT a useful language model; it exists so that acceptance
figures of its drafters are real measurements on a real (tiny) model.

- Architecture: {tc['num_hidden_layers']} layers, hidden {tc['hidden_size']}, intermediate {tc['intermediate_size']},
  {tc['num_attention_heads']} query heads / {tc['num_key_value_heads']} KV heads, head_dim {tc['head_dim']},
  vocab {tc['vocab_size']}, rope_theta {tc['rope_theta']}, BF16 weights.
- Parameters: {t['params']:,}
- Tokenizer: byte-level BPE (Qwen2 pre-tokenizer regex, GPT-2 byte map), {tc['vocab_size']} tokens incl.
  `<|endoftext|>`, `<|im_start|>`, `<|im_end|>`, `<|mask|>` (the drafters' mask token), trained by
  `scripts/train/bpe.py`.
- Chat template: chatml, `<|im_start|>user\\n...<|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n...<|im_end|>`.
- Training: {t['steps']} steps x {t['batch']} x {t['seq_len']} tokens ({t['tokens_seen'] / 1e6:.1f}M tokens seen),
  AdamW peak lr {t['peak_lr']}, cosine, bf16 autocast on CPU, wall time {t['wall_s'] / 60:.1f} min,
  final training loss (EMA) {t['final_loss_ema']}. Token mix of the stream: {t['stream_counts']}.

{data}
## Greedy outputs

{evalnote}
""" + "".join(f"- {fam}: mean output length {fr['greedy_mean_len']} tokens, share of repeated 4-grams "
              f"{fr['greedy_rep4_share']:.3f}\n" for fam, fr in fams.items()) + f"""
Example (math, greedy):

```
{fams['math']['example_prompt']}{fams['math']['example_output']}
```

{rebuild}"""
    open(os.path.join(models_dir, "tiny-qwen3", "README.md"), "w").write(card_t)

    for name, arch, pkey in (("tiny-qwen3-dflash2-b16", "DFlash2DraftModel", "v2"),
                             ("tiny-qwen3-dflash-b16", "DFlashDraftModel", "v1")):
        c = cfgs[name]
        dc = c["dflash_config"]
        extra = ""
        if pkey == "v2":
            extra = (f"- DFlash 2 additions: two-tap dynamic convolution around attention and MLP of each layer "
                     f"(kernel {dc['conv_kernel_size']}, group {dc['conv_group_size']}), initialised to identity; "
                     f"candidate path selector (rank {dc['selector_rank']}, top-{dc['selector_top_k']}) with the "
                     f"successor codebook initialised to zero; selector loss = cross-entropy over the selector "
                     f"scores of the top-k candidates with the true predecessor, only where the true token is in "
                     f"the top-k; total loss = base + selector.\n")
        card = f"""# {name}

`{arch}` block drafter (layout: docs/checkpoints.md) for `tiny-qwen3`. No `embed_tokens`, no `lm_head`:
it uses the target's embedding table and (tied) head.

- Architecture: {c['num_hidden_layers']} drafter layers (hidden {c['hidden_size']} = target hidden, intermediate
  {c['intermediate_size']}, {c['num_attention_heads']}/{c['num_key_value_heads']} heads), block size {dc['block_size']},
  target tap layers {dc['target_layer_ids']}, mask token id {dc['mask_token_id']}, non-causal block attention,
  softcap {dc.get('final_logit_softcapping')}, BF16 weights.
- Parameters: {d['params'][pkey]:,}
{extra}- Objective (DFlash block training): random anchors ({d['anchors_per_sequence']} per sequence, sorted), context features
  strictly before the anchor, block non-causal, labels at the same position (row k predicts x_(a+k), row 0
  excluded), CE through the frozen target head weighted exp(-(k-1)/{d['gamma']}).
- Data: self-distillation: {build['distill_sequences']} continuations ({build['distill_tokens']:,} tokens) of
  math / code / chat prompts generated by `tiny-qwen3` itself (half greedy, half sampled at T=0.8), batched
  with a KV cache ({build['distill_wall_s'] / 60:.1f} min).
- Training: {d['steps']} steps x {d['batch_sequences']} sequences, AdamW peak lr {d['peak_lr']}, cosine; both
  drafters trained jointly on identical batches, anchors and step counts; wall time (both) {d['wall_s'] / 60:.1f} min.
- Final losses (EMA): {json.dumps(d['final_loss_ema'])}
- Held-out block acceptance estimate at the end of training (greedy sequences, teacher-forced blocks):
  {json.dumps({k: round(v, 3) for k, v in d.get('val_block_tau', {}).items()})}

{data}
## Acceptance (greedy, block 16)

{evalnote}
{table}
Per position (math/code/chat):

{pp}
Quality bar:

{bars}

{rebuild}"""
        open(os.path.join(models_dir, name, "README.md"), "w").write(card)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--work", default=os.path.join(ROOT, ".train-work"))
    ap.add_argument("--prompts", type=int, default=5)
    ap.add_argument("--max-new", type=int, default=96)
    ap.add_argument("--seed", type=int, default=1234)
    a = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    t0 = time.time()
    res, golden = run_eval(a.models, a.prompts, a.seed, a.max_new)
    res["wall_s"] = round(time.time() - t0, 1)
    with open(os.path.join(a.models, "eval.json"), "w") as f:
        json.dump(res, f, indent=1)
        f.write("\n")
    with open(os.path.join(a.models, "eval-golden.json"), "w") as f:
        json.dump(golden, f, indent=1)
        f.write("\n")
    build = json.load(open(os.path.join(a.models, "build_info.json")))
    write_cards(a.models, res, build)
    print(json.dumps({f: {k: v["tau"] for k, v in fr["variants"].items()} | {"rep4": fr["greedy_rep4_share"]}
                      for f, fr in res["families"].items()}, indent=1))


if __name__ == "__main__":
    main()
