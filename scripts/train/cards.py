"""Model cards (README.md) of the embedded drafters, from models/eval.json (scripts/train/evaluate.py),
models/build_info.json (scripts/train/build_all.py) and, when given, the summary.csv of a
`dflash-bench run -c 1 --max-samples 8` of the same models (the default sweep's own numbers on the
first 8 of its 16 prompts per family)."""
import csv
import json
import os

# (directory, architecture, build_info params key, eval keys shown in the card)
DRAFTER_CARDS = [
    ("tiny-qwen3-dflash2-b16", "DFlash2DraftModel", "v2", ["dflash2", "selector-off", "conv-off"]),
    ("tiny-qwen3-dflash-b16", "DFlashDraftModel", "v1", ["dflash-v1"]),
    ("tiny-qwen3-dspark-b16", "DSparkDraftModel", "dspark", ["dspark"]),
]
# the chain drafters (chain_train.py): (directory, architecture, build_info params key, eval keys)
CHAIN_CARDS = [("tiny-qwen3-eagle3", "LlamaForCausalLMEagle3", "eagle3", ["eagle3"]),
               ("tiny-qwen3-mtp", "MTP head (mtp.*)", "mtp", ["mtp"])]
ALL_KEYS = ["mtp", "eagle3", "dflash-v1", "dspark", "dflash2", "selector-off", "conv-off"]
# eval key -> (run's variant, the drafter directory it runs on)
RUN_VARIANT = {"dflash-v1": "dflash", "dspark": "dspark", "dflash2": "dflash2", "selector-off": "selector-off",
               "conv-off": "conv-off", "eagle3": "eagle3", "mtp": "mtp"}
# the DFlash 2 write-up's combined table: its columns, in its order
COMBINED = ["mtp", "eagle3", "dflash", "dspark", "dflash2"]
BARS = {"math": 5.0, "code": 4.0, "chat": 2.5}  # dflash2 tau at block 16 the embedded pair aims for


def read_sweep(path):
    """{(dataset, variant, block): row} of the concurrency-1 rows of a summary.csv."""
    out = {}
    with open(path, newline="") as f:
        for r in csv.DictReader(f):
            if r["concurrency"] == "1" and r["variant"] != "ar":
                out[(r["dataset"], r["variant"], int(r["block_size"]))] = r
    return out


def _f(x, nd=2):
    return f"{x:.{nd}f}"


def _table(res, sweep, keys):
    head = ("| family | variant | B | tau (eval) | tau (`run`) | eval vs run | oracle tau (eval) | oracle tau (`run`) "
            "| speedup (`run`, c=1) |\n|---|---|---|---|---|---|---|---|---|\n")
    rows = ""
    blocks = sorted(set(res["blocks"]) | {k[2] for k in sweep}, reverse=True)
    for fam, fr in res["families"].items():
        for k in keys:
            for B in blocks:
                v = fr["variants"].get(f"{k}/B{B}")
                s = sweep.get((fam, RUN_VARIANT[k], B))
                if not v and s:
                    rows += (f"| {fam} | {k} | {B} | — | {_f(float(s['tau']), 3)} | — | — | "
                             f"{_f(float(s['oracle_tau']), 3) if s['oracle_tau'] else '—'} | {_f(float(s['speedup']))} |\n")
                    continue
                if not v:
                    continue
                if s:
                    rt = float(s["tau"])
                    rows += (f"| {fam} | {k} | {B} | {_f(v['tau'], 3)} | {_f(rt, 3)} | "
                             f"{100 * (v['tau'] - rt) / rt:+.1f}% | {_f(v['oracle_tau'], 3)} | "
                             f"{_f(float(s['oracle_tau']), 3) if s['oracle_tau'] else '—'} | {_f(float(s['speedup']))} |\n")
                else:
                    rows += f"| {fam} | {k} | {B} | {_f(v['tau'], 3)} | — | — | {_f(v['oracle_tau'], 3)} | — | — |\n"
    return head + rows


def _positions(res, keys, B=16, n=8):
    """The DFlash 2 write-up's per-position table: rows = draft position, per variant the conditional
    acceptance, recall@1 and recall@16."""
    out = ""
    for fam, fr in res["families"].items():
        present = [k for k in keys if f"{k}/B{B}" in fr["variants"]]
        out += f"\n{fam}, block {B}:\n\n| position | " + " | ".join(
            f"{k} cond. acc. | {k} recall@1 | {k} recall@16" for k in present) + " |\n"
        out += "|---|" + "---|" * (3 * len(present)) + "\n"
        for i in range(n):
            cells = []
            for k in present:
                v = fr["variants"][f"{k}/B{B}"]
                cells += [_f(v["conditional_acceptance"][i]), _f(v["recall@1"][i]), _f(v["recall@16"][i])]
            out += f"| {i + 1} | " + " | ".join(cells) + " |\n"
    return out


def combined_table(sweep):
    """The write-up's combined table from `run`'s rows (c = 1): per family and block size, tau and
    speedup of each baseline and DFlash 2, and draft ms per cycle (chain drafters grow with B)."""
    if not sweep:
        return "(no `run` CSV given: see the closing note of the build for the table)\n"
    fams = sorted({k[0] for k in sweep}, key=lambda f: ["math", "code", "chat"].index(f) if f in ("math", "code", "chat") else 9)
    blocks = sorted({k[2] for k in sweep})
    head = "| family | B | " + " | ".join(f"{v} tau / speedup / draft ms" for v in COMBINED) + " |\n"
    head += "|---|--:|" + "---|" * len(COMBINED) + "\n"
    rows = ""
    for fam in fams:
        for B in blocks:
            cells = []
            for v in COMBINED:
                r = sweep.get((fam, v, B))
                cells.append(f"{float(r['tau']):.2f} / {float(r['speedup']):.2f}x / {float(r['draft_ms_per_cycle']):.2f}"
                             if r else "—")
            rows += f"| {fam} | {B} | " + " | ".join(cells) + " |\n"
    return head + rows


def _bars(res):
    lines = []
    for fam, fr in res["families"].items():
        t2 = fr["variants"].get("dflash2/B16", {}).get("tau")
        t1 = fr["variants"].get("dflash-v1/B16", {}).get("tau")
        if t2 is None:
            continue
        lines.append(f"- {fam}: dflash2 tau {t2:.3f} (aim ≥ {BARS[fam]}: {'met' if t2 >= BARS[fam] else 'missed'}); "
                     f"dflash (v1) {t1:.3f} ({'below' if t1 < t2 else 'NOT below'} dflash2)")
        if fr.get("lossless_mismatch"):
            lines.append(f"  - {fr['lossless_mismatch']} outputs differ between variants: NOT lossless")
    return "\n".join(lines)


def write_cards(models_dir, res, build, sweep, only=None):
    """only: the eval keys whose cards to write (None: every card)"""
    d = build["drafters"]
    vers = "\n".join(f"- `{k}` {v}" for k, v in build["versions"].items())
    data = (f"Data: self-distillation by `tiny-qwen3` itself: {build['distill_sequences']} continuations "
            f"({build['distill_tokens']:,} tokens, {build['distill_wall_s'] / 60:.1f} min) of prompts rendered exactly as "
            f"`dflash-bench run` renders its built-in sets (chatml, thinking off; math with its reasoning suffix, code "
            f"in the code wrapper, code-basic as is, chat turn 1 and turn 2 after the target's own answer), written by "
            f"the generators of `scripts/datasets/make_datasets.py` with other seeds, more code parameters and more "
            f"chat topics, plus the target's raw training format; every prompt of the committed built-in sets is "
            f"held out (`scripts/train/prompts.py`). Every prompt greedy, a third also sampled at T = 0.8. "
            f"Package versions at build time:\n\n{vers}\n")
    evalnote = (f"Evaluation: `scripts/train/evaluate.py` with the reference cycle `scripts/reference/cycle_ref.py` "
                f"on the first {res['max_samples']} per family of the 16 prompts the default sweep measures "
                f"(`run --max-samples {res['max_samples']} --seed {res['sweep_seed']}`'s choice, chat's two turns), greedy, "
                f"max_new_tokens {res['max_new_tokens']}. tau = tokens committed by drafting cycles / drafting cycles "
                f"(the prefill is no cycle), the definition of `run`'s `tau` column; oracle tau = what a perfect "
                f"selector over the drafter's top-16 would reach. `run` columns: `dflash-bench run -c 1 "
                f"--max-samples {res['max_samples']}` on the same "
                f"models (the default sweep at concurrency 1 on those prompts; on a CPU this cache-resident 2M-parameter pair verifies B rows "
                f"for nearly B times a decode step, so its speedups stay near or below 1: the taus are what it is for).\n")
    train = (f"- Training: {d['steps']} steps x {d['batch_sequences']} sequences x {d['anchors_per_sequence']} anchors, "
             f"AdamW peak lr {d['peak_lr']}, cosine; the DFlash, DFlash 2 and DSpark drafters trained jointly on "
             f"identical batches, anchors and step counts from the same initial backbone; wall time (all three) "
             f"{d['wall_s'] / 60:.1f} min on 2 CPU cores.\n"
             f"- Objective (DFlash block training): random anchors, context features strictly before the anchor, "
             f"block non-causal, row k predicts x_(a+k) (row 0 excluded), CE through the frozen target head weighted "
             f"exp(-(k-1)/{d['gamma']}).\n"
             f"- Final losses (EMA): {json.dumps(d['final_loss_ema'])}\n"
             f"- Teacher-forced block acceptance on held-out greedy sequences: "
             f"{json.dumps({k: round(v, 3) for k, v in d.get('val_block_tau', {}).items()})}\n")
    rebuild = ("Rebuild: `scripts/train/build_all` (fixed seeds; reuses the committed target; about 75 min on 2 CPU "
               "cores, resumable: `--budget-minutes M` stops at a checkpoint, the same command goes on; "
               "`--only-chain` rebuilds only the EAGLE-3 and MTP drafters).\n")
    write_chain_cards(models_dir, res, build, sweep, data, evalnote, rebuild, only)
    for name, arch, pkey, keys in DRAFTER_CARDS:
        if only and not set(keys) & only:
            continue
        cp = os.path.join(models_dir, name, "config.json")
        if not os.path.exists(cp):
            continue
        c = json.load(open(cp))
        dc = c["dflash_config"]
        extra = ""
        if pkey == "v2":
            extra = (f"- DFlash 2 additions: two-tap dynamic convolution around attention and MLP of each layer "
                     f"(kernel {dc['conv_kernel_size']}, group {dc['conv_group_size']}), initialised to identity; "
                     f"candidate path selector (rank {dc['selector_rank']}, top-{dc['selector_top_k']}), successor "
                     f"codebook initialised to zero; selector loss = CE over the selector scores of the top-k "
                     f"candidates with the true predecessor, where the true token is in the top-k.\n")
        if pkey == "dspark":
            extra = (f"- DSpark head: the DFlash (v1) backbone plus a Markov head of rank {d['markov_rank']}: the "
                     f"logits of block row k get markov_w2 · markov_w1[prev], prev = the token at row k-1 (the anchor "
                     f"for row 1); trained teacher-forced (prev = the true token), drafted sequentially; markov_w2 "
                     f"initialised to zero.\n")
        card = f"""# {name}

`{arch}` block drafter (layout: docs/checkpoints.md) for `tiny-qwen3`. No `embed_tokens`, no `lm_head`:
it uses the target's embedding table and (tied) head.

- Architecture: {c['num_hidden_layers']} drafter layers (hidden {c['hidden_size']} = target hidden, intermediate
  {c['intermediate_size']}, {c['num_attention_heads']}/{c['num_key_value_heads']} heads), block size {dc['block_size']},
  target tap layers {dc['target_layer_ids']}, mask token id {dc['mask_token_id']}, non-causal block attention,
  softcap {dc.get('final_logit_softcapping')}, BF16 weights.
- Parameters: {d['params'][pkey]:,}
{extra}{train}
{data}
## Acceptance (greedy)

{evalnote}
{_table(res, sweep, ALL_KEYS)}
Per position (conditional acceptance = accepted / reached; recall@k = the target's token among the
drafter's top k, given every earlier position was right):
{_positions(res, ALL_KEYS if pkey == "v2" else keys + ["dflash2"])}
Aims for the default sweep (block 16):

{_bars(res)}

{rebuild}"""
        with open(os.path.join(models_dir, name, "README.md"), "w") as f:
            f.write(card)


def write_chain_cards(models_dir, res, build, sweep, data, evalnote, rebuild, only=None):
    d = build.get("chain_drafters")
    if not d:
        return
    dd = d.get("distill")
    if dd:  # the chain drafters' own distillation run (build_all --only-chain regenerates it)
        data = data.replace(f"{build['distill_sequences']} continuations ({build['distill_tokens']:,} tokens, "
                            f"{build['distill_wall_s'] / 60:.1f} min)",
                            f"{dd['sequences']} continuations ({dd['tokens']:,} tokens, {dd['wall_s'] / 60:.1f} min; the "
                            f"block drafters' run of the same pipeline and seeds had {build['distill_tokens']:,})")
    for name, arch, pkey, keys in CHAIN_CARDS:
        if only and not set(keys) & only:
            continue
        cp = os.path.join(models_dir, name, "config.json")
        if not os.path.exists(cp):
            continue
        c = json.load(open(cp))
        if pkey == "eagle3":
            what = (f"EAGLE-3 drafter in the EAGLE / SpecForge layout (`midlayer.*`, docs/checkpoints.md): one decoder "
                    f"layer whose attention reads [input_layernorm(embedding) ; hidden_norm(g)] (2 x {c['hidden_size']}), "
                    f"`fc` over the target's residual stream after layers "
                    f"{c['eagle_config']['eagle_aux_hidden_state_layer_ids']} (output-of-layer ids, the first 1), its own "
                    f"`lm_head` over the full vocabulary ({c['draft_vocab_size']}; `d2t` offsets 0), the target's "
                    f"embedding; steps 2.. feed back the layer's pre-norm output.")
        else:
            what = (f"MTP head in the Qwen3.5 / Qwen3-Next names (`mtp.*`, docs/checkpoints.md): "
                    f"u = fc([pre_fc_norm_embedding(emb) ; pre_fc_norm_hidden(h)]), one decoder layer of the target's "
                    f"shape, `mtp.norm`, the target's embedding and tied head; h = the target's last hidden after its "
                    f"final norm for step 1, the head's own post-norm output after. The config is the target's plus "
                    f"`mtp_num_hidden_layers: 1`.")
        bs = build["drafters"]["steps"]
        short = (f"\n- **Fewer steps than the block drafters** ({d['steps']} against their {bs}: the budget of the machine "
                 f"that built it); `scripts/train/build_all --only-chain --chain-steps {bs}` trains the same-budget "
                 f"pair.") if d["steps"] != bs else ""
        card = f"""# {name}

{arch} chain drafter for `tiny-qwen3` (variant `{pkey}`): {what} B-1 sequential steps per cycle, so its
draft time grows with the block (`draft_ms_per_cycle`).

- Parameters: {d['params'][pkey]:,}; BF16 weights.
- Training: {d['steps']} steps x {d['batch_sequences']} sequences x {d['anchors_per_sequence']} anchors (the block
  drafters' data, anchors and batch; EAGLE-3 and MTP trained jointly on identical batches), AdamW peak lr
  {d['peak_lr']}, cosine; wall time (both) {d['wall_s'] / 60:.1f} min on 2 CPU cores.
- Objective (EAGLE-3's training-time test, both drafters): the chain of an anchor a starts at row a-1 fed x_a
  and the target's features there, step k predicts x_(a+k) fed x_(a+k-1) (teacher-forced) and its own previous
  hidden, attending to the context rows and its own earlier steps; CE weighted exp(-(k-1)/{d['gamma']}),
  k = 1..{d['block_size'] - 1}.{short}
- Final losses (EMA): {json.dumps(d['final_loss_ema'])}
- Greedy chain acceptance on held-out greedy sequences: {json.dumps({k: round(v, 3) for k, v in d['val_block_tau'].items()})}

{data}
## Acceptance (greedy)

{evalnote}
{_table(res, sweep, ALL_KEYS)}
Per position (conditional acceptance = accepted / reached; recall@k as the block drafters'):
{_positions(res, keys + ["dflash2"])}
## The write-up's combined table (`run`, c = 1)

{combined_table(sweep)}
{rebuild}"""
        with open(os.path.join(models_dir, name, "README.md"), "w") as f:
            f.write(card)
