#!/usr/bin/python3
"""Evaluate the exported drafters with the independent reference cycle (scripts/reference/cycle_ref.py)
on the first 8 per family of the 16 prompts the default sweep measures.

Per family (math, code, chat: the samples `dflash-bench run --max-samples 8 --seed 0` picks, rendered as
`run` renders them, chat's second turn after the target's own first answer), block size (--blocks) and
variant, greedy: tau = tokens committed by drafting cycles / drafting cycles (the prefill's token is no
cycle's; the definition of `run`'s tau column), oracle tau, per-position conditional acceptance and
recall@1 / recall@16 (the DFlash 2 write-up's per-position table).  With --sweep-csv (the CSV of a
`dflash-bench run -c 1` of the same models) the model cards show the C tool's numbers next to these.
Writes models/eval.json, models/eval-golden.json (the golden test_models replays) and the drafters'
README.md model cards (scripts/train/cards.py).
"""
import argparse
import json
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "scripts", "reference"))

import torch  # noqa: E402

import prompts as P  # noqa: E402
from bpe import Tokenizer  # noqa: E402

FAMILIES = ("math", "code", "chat")
# (checkpoint directory, [(result key, variant)]); the keys are eval-golden.json's (tests/test_models.c)
DRAFTERS = [("tiny-qwen3-dflash-b16", [("dflash-v1", "dflash")]),
            ("tiny-qwen3-dspark-b16", [("dspark", "dspark")]),
            ("tiny-qwen3-dflash2-b16", [("dflash2", "dflash2"), ("selector-off", "selector-off"),
                                        ("conv-off", "conv-off")]),
            ("tiny-qwen3-eagle3", [("eagle3", "eagle3")]),
            ("tiny-qwen3-mtp", [("mtp", "mtp")])]
CHAIN = {"tiny-qwen3-eagle3", "tiny-qwen3-mtp"}  # chain_ref.ChainDrafter


def rep4(ids):
    g = [tuple(ids[i:i + 4]) for i in range(len(ids) - 3)]
    return (1 - len(set(g)) / len(g)) if g else 0.0


def _add(acc, x):
    return [a + b for a, b in zip(acc, x)] if acc else list(x)


def _ratio(x, y):
    return [round(a / b, 4) if b else 0.0 for a, b in zip(x, y)]


def run_eval(models_dir, max_samples, sweep_seed, max_new, blocks, logf=print, only=None):
    from qwen3_ref import Target
    from dflash_ref import Drafter
    from chain_ref import ChainDrafter
    from cycle_ref import speculative_generate
    tok = Tokenizer(os.path.join(models_dir, "tiny-qwen3", "tokenizer.json"))
    special = set(tok.special.values())
    target = Target.from_dir(os.path.join(models_dir, "tiny-qwen3"))
    drafters = {d: (ChainDrafter if d in CHAIN else Drafter).from_dir(os.path.join(models_dir, d), target)
                for d, _ in DRAFTERS if os.path.exists(os.path.join(models_dir, d, "config.json"))}
    res = {"max_new_tokens": max_new, "blocks": list(blocks), "temperature": 0.0, "max_samples": max_samples,
           "sweep_seed": sweep_seed, "families": {}}
    golden = {"description": "Greedy (T=0) block-16 speculative decoding with the reference cycle "
                             "(scripts/reference/cycle_ref.py) on the first default-sweep prompt of each family. "
                             "tau = committed / target steps (prefill counted).",
              "block_size": 16, "temperature": 0.0, "max_new_tokens": max_new, "families": {}}
    for fam in FAMILIES:
        samples = P.default_sweep_samples(fam, max_samples, sweep_seed)
        fr = {"variants": {}, "lossless_mismatch": 0}
        reference_outs = None
        for dname, variants in DRAFTERS:
            if dname not in drafters:
                continue
            for key, v in variants:
                if only and key not in only:
                    continue
                for B in blocks:
                    t0 = time.time()
                    acc = {"committed": 0, "cycles": 0, "oracle": 0.0, "reached": None, "accepted": None,
                           "r1h": None, "r1r": None, "rkh": None, "rkr": None}
                    outs = []
                    for si, row in enumerate(samples):
                        msgs = []
                        for ti, user in enumerate(P.turn_texts(fam, row)):
                            msgs.append(("user", user))
                            ids = tok.encode(P.chatml(msgs))
                            out, st = speculative_generate(target, drafters[dname], ids, v, B, max_new, 0.0, 1.0,
                                                           0, 0, recall_k=16)
                            outs.append(out)
                            msgs.append(("assistant", tok.decode([i for i in out if i not in special])))
                            acc["committed"] += len(out) - 1
                            acc["cycles"] += st["cycles"]
                            acc["oracle"] += st["oracle_accept_len"] * st["cycles"]
                            acc["reached"] = _add(acc["reached"], st["per_position"]["reached"])
                            acc["accepted"] = _add(acc["accepted"], st["per_position"]["accepted"])
                            rc = st["recall"]
                            for a, b in (("r1h", "top1_hits"), ("r1r", "top1_reached"), ("rkh", "topk_hits"),
                                         ("rkr", "topk_reached")):
                                acc[a] = _add(acc[a], rc[b])
                            if si == 0 and ti == 0 and B == 16:
                                golden["families"].setdefault(fam, {"prompt_text": P.chatml(msgs[:1]),
                                                                    "prompt_ids": ids, "variants": {}})
                                golden["families"][fam]["variants"][key] = {
                                    "tau": st["tau"], "mean_accept_len": st["mean_accept_len"],
                                    "cycles": st["cycles"], "committed": st["committed"],
                                    "accepted_per_cycle": [t["accepted"] for t in st["trace"]],
                                    "output_ids": out, "min_margin": st.get("min_margin")}
                    if reference_outs is None:
                        reference_outs = outs
                        fr["greedy_rep4_share"] = round(sum(rep4(o) for o in outs) / len(outs), 4)
                        fr["greedy_mean_len"] = round(sum(len(o) for o in outs) / len(outs), 1)
                        fr["example_prompt"] = P.chatml([("user", P.turn_texts(fam, samples[0])[0])])
                        fr["example_output"] = tok.decode(outs[0])
                    else:
                        fr["lossless_mismatch"] += sum(o != g for o, g in zip(outs, reference_outs))
                    cyc = max(acc["cycles"], 1)
                    fr["variants"][f"{key}/B{B}"] = {
                        "drafter": dname, "variant": v, "block_size": B, "requests": len(outs),
                        "tau": round(acc["committed"] / cyc, 4), "oracle_tau": round(acc["oracle"] / cyc, 4),
                        "cycles": acc["cycles"], "committed_by_cycles": acc["committed"],
                        "conditional_acceptance": _ratio(acc["accepted"], acc["reached"]),
                        "recall@1": _ratio(acc["r1h"], acc["r1r"]), "recall@16": _ratio(acc["rkh"], acc["rkr"]),
                        "wall_s": round(time.time() - t0, 1)}
                    logf(f"eval {fam} {key} B{B}: tau {acc['committed'] / cyc:.3f} "
                         f"oracle {acc['oracle'] / cyc:.3f} ({time.time() - t0:.0f}s)")
        res["families"][fam] = fr
    return res, golden


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--models", default=os.path.join(ROOT, "models"))
    ap.add_argument("--max-samples", type=int, default=8, help="prompts per family, as run --max-samples")
    ap.add_argument("--sweep-seed", type=int, default=0, help="as run --seed (which samples are picked)")
    ap.add_argument("--max-new", type=int, default=64, help="as run --max-new-tokens")
    ap.add_argument("--blocks", default="16", help="block sizes, comma list (the card shows run's for the others)")
    ap.add_argument("--sweep-csv", help="CSV of `dflash-bench run -c 1` on the same models, for the cards")
    ap.add_argument("--cards-only", action="store_true", help="rewrite the cards from models/eval.json")
    ap.add_argument("--only", help="eval keys to (re)evaluate, comma list (e.g. eagle3,mtp), merged into the "
                                   "existing eval.json / eval-golden.json")
    a = ap.parse_args(argv)
    torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))
    evp = os.path.join(a.models, "eval.json")
    if not a.cards_only:
        t0 = time.time()
        only = set(a.only.split(",")) if a.only else None
        res, golden = run_eval(a.models, a.max_samples, a.sweep_seed, a.max_new,
                               [int(b) for b in a.blocks.split(",")], only=only)
        res["wall_s"] = round(time.time() - t0, 1)
        if only:  # merged into what the other keys' evaluation wrote
            old = json.load(open(evp))
            oldg = json.load(open(os.path.join(a.models, "eval-golden.json")))
            for fam, fr in res["families"].items():
                of = old["families"][fam]
                of["variants"] = {k: v for k, v in of["variants"].items() if k.split("/")[0] not in only}
                of["variants"].update(fr["variants"])
                fg = golden["families"].get(fam)
                if fg:
                    og = oldg["families"].setdefault(fam, fg)
                    og["variants"].update(fg["variants"])
            old.setdefault("wall_s_by_keys", {})[",".join(sorted(only))] = res["wall_s"]
            res, golden = old, oldg
        with open(evp, "w") as f:
            json.dump(res, f, indent=1)
            f.write("\n")
        with open(os.path.join(a.models, "eval-golden.json"), "w") as f:
            json.dump(golden, f, indent=1)
            f.write("\n")
    res = json.load(open(evp))
    build = json.load(open(os.path.join(a.models, "build_info.json")))
    from cards import read_sweep, write_cards
    sweep = read_sweep(a.sweep_csv) if a.sweep_csv else {}
    write_cards(a.models, res, build, sweep, set(a.only.split(",")) if a.only else None)
    print(json.dumps({f: {k: v["tau"] for k, v in fr["variants"].items()} for f, fr in res["families"].items()},
                     indent=1))


if __name__ == "__main__":
    main()
