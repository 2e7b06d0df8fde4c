#!/usr/bin/python3
"""Rebuild the project's tiny models: corpus -> tokenizer -> target -> self-distillation data ->
DFlash / DFlash 2 / DSpark drafters -> EAGLE-3 / MTP drafters (chain_train.py) -> export (models/)
-> evaluation (model cards, eval-golden.json).

Run through scripts/train/build_all (sets nice, jemalloc, thread env).  Intermediate artefacts go to
.train-work/ (ignored); a stage whose output exists there is reused unless --force is given.

The target is frozen: by default the committed models/tiny-qwen3 (and its tokenizer) is loaded and
only the drafters are rebuilt (--train-target retrains it from the corpus).  Drafter training is
resumable: it checkpoints to .train-work/drafters-ckpt.pt every 50 steps and when --budget-minutes
(wall time of this invocation) is spent, then exits with status 3; run the same command again to go on.
The chain drafters (EAGLE-3, MTP) train after them the same way (.train-work/chain-ckpt.pt);
--only-chain keeps the committed DFlash / DFlash 2 / DSpark drafters and trains only those two.
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

torch.set_num_threads(int(os.environ.get("TRAIN_THREADS", "2")))

import corpus  # noqa: E402
from bpe import SPECIAL_TOKENS, Tokenizer, tokenizer_json, train_bpe  # noqa: E402
import prompts as builtin_prompts  # noqa: E402
from train import distill_data, log, train_drafters, train_target, block_tau  # noqa: E402

VOCAB = 2048
B = 16
MARKOV_RANK = 8  # DSpark head: 2 * V * r = 32768 weights, 3.5% of the v1 drafter


def target_config(tok):
    return {
        "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3",
        "hidden_size": 192, "intermediate_size": 512, "num_hidden_layers": 4,
        "num_attention_heads": 6, "num_key_value_heads": 2, "head_dim": 32,
        "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "vocab_size": VOCAB,
        "tie_word_embeddings": True, "max_position_embeddings": 1024, "hidden_act": "silu",
        "attention_bias": False, "torch_dtype": "bfloat16",
        "bos_token_id": tok.special["<|endoftext|>"],
        "eos_token_id": [tok.special["<|im_end|>"], tok.special["<|endoftext|>"]],
        "pad_token_id": tok.special["<|endoftext|>"],
    }


def drafter_config(tcfg, tok, v2, dspark=False):
    dc = {"block_size": B, "mask_token_id": tok.special["<|mask|>"], "target_layer_ids": [0, 1, 2, 3],
          "output_multiplier": 1.0, "final_logit_softcapping": 30.0}
    if v2:
        dc.update({"conv_group_size": 16, "conv_kernel_size": 2, "selector_rank": 64, "selector_top_k": 16})
    c = {k: tcfg[k] for k in ("model_type", "hidden_size", "intermediate_size", "num_attention_heads",
                               "num_key_value_heads", "head_dim", "rms_norm_eps", "rope_theta", "vocab_size",
                               "max_position_embeddings", "hidden_act", "attention_bias", "eos_token_id")}
    c.update({
        "architectures": ["DFlash2DraftModel" if v2 else "DSparkDraftModel" if dspark else "DFlashDraftModel"],
        "num_hidden_layers": 2, "num_target_layers": tcfg["num_hidden_layers"], "block_size": B,
        "is_causal": False, "layer_types": ["sliding_attention"] * 2, "sliding_window": 2048,
        "rope_parameters": {"rope_theta": tcfg["rope_theta"], "rope_type": "default"},
        "tie_word_embeddings": False, "torch_dtype": "bfloat16", "dflash_config": dc,
    })
    if dspark:
        c["markov_head_type"] = "vanilla"
    return c


def stage(path, force):
    return force or not os.path.exists(path)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--work", default=os.path.join(ROOT, ".train-work"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models"))
    ap.add_argument("--train-target", action="store_true",
                    help="train the target from the corpus instead of loading the committed models/tiny-qwen3")
    ap.add_argument("--target-minutes", type=float, default=20.0)
    ap.add_argument("--target-steps", type=int, default=None,
                    help="fixed step count (overrides the time budget; the committed target used 747)")
    ap.add_argument("--drafter-steps", type=int, default=1000,
                    help="joint steps of the three drafters (v1 of the models had 197)")
    ap.add_argument("--chain-steps", type=int, default=None,
                    help="joint steps of the EAGLE-3 and MTP drafters (default: --drafter-steps)")
    ap.add_argument("--only-chain", action="store_true",
                    help="keep the committed block drafters; train and export only EAGLE-3 and MTP")
    ap.add_argument("--budget-minutes", type=float, default=None,
                    help="wall time of this invocation; drafter training checkpoints and exits 3 when spent")
    ap.add_argument("--raw-prompts", type=int, default=800,
                    help="distillation prompts in the corpus's raw chat format (the rest use the built-in sets' formats)")
    ap.add_argument("--stream-tokens", type=float, default=14e6)
    ap.add_argument("--seed", type=int, default=1234)
    ap.add_argument("--force", action="store_true")
    ap.add_argument("--skip-eval", action="store_true")
    ap.add_argument("--no-apt", action="store_true")
    a = ap.parse_args()
    os.makedirs(a.work, exist_ok=True)
    logf = open(os.path.join(a.work, "build.log"), "a")
    t_start = time.time()
    deadline = t_start + a.budget_minutes * 60 if a.budget_minutes else None
    committed = os.path.join(a.out, "tiny-qwen3")
    reuse = not a.train_target and os.path.exists(os.path.join(committed, "model.safetensors"))
    random.seed(a.seed)
    torch.manual_seed(a.seed)
    if not a.no_apt:
        corpus.ensure_packages()
    versions = corpus.package_versions()
    times = {}

    # ---- tokenizer
    tokp = os.path.join(a.work, "tokenizer.json")
    if reuse:
        tokp = os.path.join(committed, "tokenizer.json")
    elif stage(tokp, a.force):
        t0 = time.time()
        text = corpus.tokenizer_training_text(seed=a.seed)
        vocab, merges = train_bpe(text, VOCAB)
        with open(tokp, "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(vocab, merges), f, ensure_ascii=False, indent=1)
        log(f"tokenizer: {len(vocab)} tokens, {len(merges)} merges, {time.time() - t0:.0f}s", logf)
        times["tokenizer_s"] = round(time.time() - t0, 1)
    tok = Tokenizer(tokp)
    tcfg = target_config(tok)

    # ---- token stream
    streamp = os.path.join(a.work, "stream.pt")
    if not reuse and stage(streamp, a.force):
        t0 = time.time()
        rng = random.Random(a.seed + 1)
        code = corpus.code_samples("train", a.seed)
        chat = corpus.chat_samples()
        rng.shuffle(chat)
        docs = [("code", corpus.chat_text(q, s)) for q, s in code]
        docs += [("chat", corpus.chat_text(q, s)) for q, s in chat]
        n_math = 75000
        docs += [("math", corpus.chat_text(q, s)) for q, s in corpus.math_samples(n_math, a.seed + 2)]
        rng.shuffle(docs)
        eot = tok.special["<|endoftext|>"]
        stream, counts = [], {"code": 0, "chat": 0, "math": 0}
        for fam, d in docs:
            ids = tok.encode(d)
            if fam != "math" and counts[fam] > 0.28 * a.stream_tokens:
                continue
            counts[fam] += len(ids) + 1
            stream.extend(ids)
            stream.append(eot)
            if len(stream) >= a.stream_tokens:
                break
        torch.save({"tokens": torch.tensor(stream, dtype=torch.int16), "counts": counts,
                    "samples": {"code": len(code), "chat": len(chat), "math": n_math}}, streamp)
        log(f"stream: {len(stream)} tokens {counts} {time.time() - t0:.0f}s", logf)
        times["stream_s"] = round(time.time() - t0, 1)
    st = None if reuse else torch.load(streamp)

    # ---- target
    targp = os.path.join(a.work, "target.pt")
    if reuse:
        from safetensors_io import load_hf_dir
        with open(os.path.join(a.out, "build_info.json")) as f:
            prev_build = json.load(f)
        cfg0, tens = load_hf_dir(committed)
        if cfg0 != tcfg:
            raise SystemExit(f"{committed}/config.json differs from this script's target config; use --train-target")
        torch.save({"state": {k: v.float() for k, v in tens.items()}, "info": prev_build["target"], "cfg": tcfg}, targp)
        log(f"target: the committed {committed} (frozen)", logf)
    elif stage(targp, a.force):
        target, tinfo = train_target(tcfg, st["tokens"].long().tolist(), a.target_minutes * 60, a.seed, logf=logf,
                                     steps=a.target_steps)
        tinfo["stream_counts"] = st["counts"]
        torch.save({"state": target.state_dict(), "info": tinfo, "cfg": tcfg}, targp)
    from models import Qwen3Target, DFlashDrafter
    ck = torch.load(targp)
    target = Qwen3Target(ck["cfg"])
    target.load_state_dict(ck["state"])
    target.eval()
    tinfo = ck["info"]

    # ---- self-distillation data
    distp = os.path.join(a.work, "distill.pt")
    stop = [tok.special["<|im_end|>"], tok.special["<|endoftext|>"]]
    if stage(distp, a.force):
        t0 = time.time()
        rng = random.Random(a.seed + 3)
        # the built-in sets' formats (every prompt greedy; a third also sampled at T = 0.8) ...
        fmt = builtin_prompts.training_prompts(1200, 600, 150, 440, a.seed + 4)
        first = [(fam, tok.encode(builtin_prompts.chatml([("user", turns[0])]))) for fam, turns in fmt]
        # ... plus the corpus's raw chat format the target was trained on
        raw = [("math", tok.encode(corpus.chat_prompt(q))) for q, _ in corpus.math_samples(a.raw_prompts // 2, a.seed + 5)]
        code = corpus.code_samples("train", a.seed + 6)
        raw += [("code", tok.encode(corpus.chat_prompt(q))) for q, _ in code[: a.raw_prompts // 4]]
        chat = corpus.chat_samples()
        rng.shuffle(chat)
        raw += [("chat", tok.encode(corpus.chat_prompt(q))) for q, _ in chat[: a.raw_prompts - len(raw)]]
        raw = [p for p in raw if len(p[1]) <= 96]

        def with_samples(ps, salt):
            r = random.Random(a.seed + salt)
            return [(f, ids, 0.0) for f, ids in ps] + [(f, ids, 0.8) for f, ids in ps if r.random() < 1 / 3]

        seqs = distill_data(target, with_samples(first, 10) + [(f, ids, t) for f, ids, t in with_samples(raw, 11)
                                                                if t == 0.0 or f != "math"],
                            128, stop, a.seed + 6, logf=logf)
        # chat turn 2 follows the target's own (greedy) answer to turn 1, as `run` does
        answers = {tuple(s["ids"][: s["plen"]]): s["ids"][s["plen"]:] for s in seqs if s["greedy"]}
        second = []
        for fam, turns in fmt:
            if len(turns) < 2:
                continue
            ans = answers[tuple(tok.encode(builtin_prompts.chatml([("user", turns[0])])))]
            text = tok.decode([i for i in ans if i not in stop])
            second.append((fam, tok.encode(builtin_prompts.chatml([("user", turns[0]), ("assistant", text),
                                                                    ("user", turns[1])]))))
        second = [p for p in second if len(p[1]) <= 400]
        seqs += distill_data(target, with_samples(second, 12), 128, stop, a.seed + 7, logf=logf)
        torch.save({"seqs": seqs, "wall_s": round(time.time() - t0, 1)}, distp)
        log(f"distill: {len(seqs)} sequences, {sum(len(s['ids']) for s in seqs)} tokens, {time.time() - t0:.0f}s", logf)
    dd = torch.load(distp)
    seqs = dd["seqs"]
    rng = random.Random(a.seed + 7)
    idx = list(range(len(seqs)))
    rng.shuffle(idx)
    val = [seqs[i] for i in idx[:128] if seqs[i]["greedy"]]
    train_seqs = [seqs[i] for i in idx[128:]]

    # ---- drafters
    cfgs = {"v1": drafter_config(tcfg, tok, False), "v2": drafter_config(tcfg, tok, True),
            "dspark": drafter_config(tcfg, tok, False, dspark=True)}
    drp = os.path.join(a.work, "drafters.pt")
    if a.only_chain:
        with open(os.path.join(a.out, "build_info.json")) as f:
            prev = json.load(f)
        dinfo = prev["drafters"]
    elif stage(drp, a.force):
        ckpt = os.path.join(a.work, "drafters-ckpt.pt")
        if a.force and os.path.exists(ckpt):
            os.remove(ckpt)
        models, dinfo = train_drafters(cfgs, target, train_seqs, val, a.seed + 8, a.drafter_steps, B=B,
                                       markov_rank=MARKOV_RANK, logf=logf, ckpt=ckpt, deadline=deadline)
        if models is None:
            sys.exit(3)
        taps = cfgs["v1"]["dflash_config"]["target_layer_ids"]
        mid = cfgs["v1"]["dflash_config"]["mask_token_id"]
        dinfo["val_block_tau"] = {
            "dflash_v1": block_tau(models["v1"], target, val, taps, B, mid, 16)[0],
            "dflash2": block_tau(models["v2"], target, val, taps, B, mid, 16)[0],
            "dflash2_selector_off": block_tau(models["v2"], target, val, taps, B, mid, 16, use_selector=False)[0],
            "dspark": block_tau(models["dspark"], target, val, taps, B, mid, 16)[0],
        }
        log(f"val block tau {dinfo['val_block_tau']}", logf)
        torch.save({k: m.state_dict() for k, m in models.items()} | {"info": dinfo}, drp)
    if not a.only_chain:
        dck = torch.load(drp)
        dinfo = dck["info"]

    # ---- chain drafters (EAGLE-3, MTP): same data, anchors and steps
    from chain_train import chain_configs, export_chain, train_chain_drafters
    ccfgs = chain_configs(tcfg)
    chp = os.path.join(a.work, "chain.pt")
    if stage(chp, a.force):
        ckpt = os.path.join(a.work, "chain-ckpt.pt")
        if a.force and os.path.exists(ckpt):
            os.remove(ckpt)
        cmodels, cinfo = train_chain_drafters(ccfgs, target, train_seqs, val, a.seed + 9,
                                              a.chain_steps or a.drafter_steps, B=B, logf=logf, ckpt=ckpt,
                                              deadline=deadline)
        if cmodels is None:
            sys.exit(3)
        log(f"chain val block tau {cinfo['val_block_tau']}", logf)
        torch.save({k: m.state_dict() for k, m in cmodels.items()} | {"info": cinfo}, chp)
    cck = torch.load(chp)

    # ---- export
    from export import export_all
    build = {"versions": versions, "target": tinfo, "drafters": dinfo, "chain_drafters": cck["info"],
             "distill_wall_s": dd["wall_s"],
             "distill_sequences": len(seqs), "distill_tokens": sum(len(s["ids"]) for s in seqs),
             "seed": a.seed, "times": times}
    if a.only_chain:  # the block drafters' figures stay; this run's distillation goes with the chain drafters
        for k in ("distill_wall_s", "distill_sequences", "distill_tokens", "versions", "seed", "times"):
            if k in prev:
                build[k] = prev[k]
        build["chain_drafters"] = dict(build["chain_drafters"], distill={
            "sequences": len(seqs), "tokens": sum(len(s["ids"]) for s in seqs), "wall_s": dd["wall_s"]})
        with open(os.path.join(a.out, "build_info.json"), "w") as f:
            json.dump(build, f, indent=1)
            f.write("\n")
    else:
        export_all(a.out, tcfg, target.state_dict(), cfgs, {k: dck[k] for k in cfgs}, tokp, build,
                   write_target=not reuse)
    export_chain(a.out, ccfgs, {k: cck[k] for k in ccfgs}, {})
    with open(os.path.join(a.work, "build_info.json"), "w") as f:
        json.dump(build, f, indent=1)
    log(f"export done, {time.time() - t_start:.0f}s so far", logf)

    if not a.skip_eval:
        import evaluate
        evaluate.main(["--models", a.out])
    log(f"build_all finished in {time.time() - t_start:.0f}s", logf)


if __name__ == "__main__":
    main()
