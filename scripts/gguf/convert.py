#!/usr/bin/python3
"""convert.py - a Qwen3 / LLaMA target or a DFlash / DFlash 2 drafter checkpoint directory
(config.json + safetensors) to one GGUF file at a chosen weight type, with the metadata keys
and tensor names llama.cpp's converter writes (src/model/gguf_model.h lists them).

Usage:
  scripts/gguf/convert.py MODEL_DIR OUT.gguf [--type T] [--target-dir DIR]
  scripts/gguf/convert.py --embedded OUT_DIR [--type T ...]   the pair under models/ -> OUT_DIR
  scripts/gguf/convert.py --tokenizer-only TOKENIZER.json OUT.gguf   vocabulary-only file

  --type: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
  IQ4_XS (default F16; one type throughout, not llama-quantize's mixes). Matrices take the type;
  vectors (norms) and the DFlash 2 base kernels stay F32, the selector codebooks (read row by
  row by the selector) F16 for quantized types. A matrix whose row length is not a multiple of
  the type's block falls back: K types to Q4_0 (Q2_K, Q3_K, Q4_K) or Q8_0 (Q5_K, Q6_K), IQ4_XS to
  IQ4_NL, when rows are a multiple of 32, else F16 (llama.cpp falls back likewise).
  --target-dir: where a drafter's tokenizer comes from (drafters share the target's); a target
  uses its own tokenizer.json when present.

LLaMA q / k projections are stored permuted for interleaved RoPE, as llama.cpp does: per head,
Hugging Face row j * hd/2 + i goes to row 2i + j.
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gguf_file as G  # noqa: E402
import quants as Q  # noqa: E402

TYPES = {"F32": Q.F32, "F16": Q.F16, "BF16": Q.BF16, "Q8_0": Q.Q8_0, "Q4_0": Q.Q4_0,
         "Q4_1": Q.Q4_1, "Q5_0": Q.Q5_0, "Q5_1": Q.Q5_1, "Q2_K": Q.Q2_K, "Q3_K": Q.Q3_K,
         "Q4_K": Q.Q4_K, "Q5_K": Q.Q5_K, "Q6_K": Q.Q6_K, "IQ4_NL": Q.IQ4_NL, "IQ4_XS": Q.IQ4_XS}
# general.file_type: llama.cpp's file-type numbers (one type throughout: Q3_K, Q4_K, Q5_K as its _S mixes)
FILE_TYPE = {Q.F32: 0, Q.F16: 1, Q.Q4_0: 2, Q.Q4_1: 3, Q.Q8_0: 7, Q.Q5_0: 8, Q.Q5_1: 9,
             Q.Q2_K: 10, Q.Q3_K: 11, Q.Q4_K: 14, Q.Q5_K: 16, Q.Q6_K: 18, Q.IQ4_NL: 25,
             Q.IQ4_XS: 30, Q.BF16: 32}
FALLBACK = {Q.Q4_K: Q.Q4_0, Q.Q5_K: Q.Q8_0, Q.Q6_K: Q.Q8_0, Q.Q2_K: Q.Q4_0, Q.Q3_K: Q.Q4_0,
            Q.IQ4_XS: Q.IQ4_NL}

LAYER = {"input_layernorm.weight": "attn_norm.weight",
         "self_attn.q_proj.weight": "attn_q.weight", "self_attn.k_proj.weight": "attn_k.weight",
         "self_attn.v_proj.weight": "attn_v.weight", "self_attn.o_proj.weight": "attn_output.weight",
         "self_attn.q_norm.weight": "attn_q_norm.weight",
         "self_attn.k_norm.weight": "attn_k_norm.weight",
         "post_attention_layernorm.weight": "ffn_norm.weight",
         "mlp.gate_proj.weight": "ffn_gate.weight", "mlp.up_proj.weight": "ffn_up.weight",
         "mlp.down_proj.weight": "ffn_down.weight",
         "attention_conv.base_kernel": "attn_conv_base",
         "attention_conv.kernel_projection.weight": "attn_conv_proj.weight",
         "mlp_conv.base_kernel": "ffn_conv_base",
         "mlp_conv.kernel_projection.weight": "ffn_conv_proj.weight"}
GLOBAL = {"embed_tokens.weight": "token_embd.weight", "norm.weight": "output_norm.weight",
          "lm_head.weight": "output.weight", "fc.weight": "fc.weight",
          "hidden_norm.weight": "enc.output_norm.weight",
          "candidate_selector.hidden_projection.weight": "selector_hidden.weight",
          "candidate_selector.predecessor_codebook": "selector_predecessor.weight",
          "candidate_selector.successor_codebook": "selector_successor.weight",
          "markov_head.markov_w1.weight": "markov_w1.weight", "markov_head.markov_w2.weight": "markov_w2.weight",
          "markov_head.markov_w2.scale": "markov_w2.scale",
          "confidence_head.proj.weight": "conf_proj.weight", "confidence_head.proj.bias": "conf_proj.bias"}
DSPARK_ARCHS = ("DSparkDraftModel", "Qwen3DSparkModel", "DSparkSpeculator")


def read_safetensors(d):
    """{name: float32 array} of a checkpoint directory (single file or sharded)"""
    d = Path(d)
    idx = d / "model.safetensors.index.json"
    files = sorted(set(json.load(open(idx))["weight_map"].values())) if idx.exists() \
        else ["model.safetensors"]
    out = {}
    for fn in files:
        raw = (d / fn).read_bytes()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        base = 8 + n
        for name, e in hdr.items():
            if name == "__metadata__":
                continue
            b, en = e["data_offsets"]
            buf = np.frombuffer(raw, np.uint8, en - b, base + b)
            if e["dtype"] == "F32":
                a = buf.view("<f4").astype(np.float32)
            elif e["dtype"] == "F16":
                a = buf.view("<f2").astype(np.float32)
            elif e["dtype"] == "BF16":
                a = (buf.view("<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                raise SystemExit(f"{d / fn}: tensor {name}: dtype {e['dtype']} not converted")
            out[name] = a.reshape(e["shape"])
    return out


def gguf_name(name):
    n = name[6:] if name.startswith("model.") else name
    if n in GLOBAL:
        return GLOBAL[n]
    parts = n.split(".", 2)
    if len(parts) == 3 and parts[0] == "layers" and parts[2] in LAYER:
        return f"blk.{parts[1]}.{LAYER[parts[2]]}"
    return None


def permute(w, heads):
    """Hugging Face rows -> llama.cpp's interleaved-RoPE order (per head: j*hd/2+i -> 2i+j)"""
    hd = w.shape[0] // heads
    return w.reshape(heads, 2, hd // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def tensor_type(name, a, want):
    if a.ndim == 1 or name.endswith("_conv_base"):
        return Q.F32
    if name.startswith(("selector_predecessor", "selector_successor", "markov_w")):
        return want if want in (Q.F32, Q.F16, Q.BF16) else Q.F16
    t = want
    if a.shape[-1] % Q.BLOCK[t]:
        t = FALLBACK.get(t, Q.F16)
        if a.shape[-1] % Q.BLOCK[t]:
            t = Q.F16
    return t


def pre_of(tj):
    """llama.cpp's tokenizer.ggml.pre name for a tokenizer.json's pre-tokenizer"""
    s = json.dumps(tj.get("pre_tokenizer"))
    if "p{N}{1,3}" in s:
        return "llama-bpe"
    if "Split" in s:
        return "qwen2"
    return "gpt2"


def add_tokenizer(w, p, cfg):
    """tokenizer.ggml.* from tokenizer.json at p (skipped when p is None or missing)"""
    if not p or not Path(p).exists():
        return
    tj = json.load(open(p, encoding="utf-8"))
    m = tj["model"]
    if m.get("type", "BPE") != "BPE":
        raise SystemExit(f"{p}: only byte-level BPE tokenizers are converted")
    ids = list(m["vocab"].values()) + [a["id"] for a in tj.get("added_tokens", [])]
    vocab = cfg.get("vocab_size") or max(ids) + 1
    tokens = [f"[PAD{i}]" for i in range(vocab)]
    types = [5] * vocab  # unused until named
    for s, i in m["vocab"].items():
        if i < vocab:
            tokens[i], types[i] = s, 1
    for at in tj.get("added_tokens", []):
        if at["id"] < vocab:
            tokens[at["id"]] = at["content"]
            types[at["id"]] = 3 if at.get("special") else 4
    merges = [mm if isinstance(mm, str) else " ".join(mm) for mm in m.get("merges", [])]
    w.add("tokenizer.ggml.model", G.STRING, "gpt2")
    w.add("tokenizer.ggml.pre", G.STRING, pre_of(tj))
    w.add_array("tokenizer.ggml.tokens", G.STRING, tokens)
    w.add_array("tokenizer.ggml.token_type", G.I32, types)
    w.add_array("tokenizer.ggml.merges", G.STRING, merges)
    if isinstance(cfg.get("bos_token_id"), int):
        w.add("tokenizer.ggml.bos_token_id", G.U32, cfg["bos_token_id"])
    if isinstance(cfg.get("pad_token_id"), int):
        w.add("tokenizer.ggml.padding_token_id", G.U32, cfg["pad_token_id"])
    w.add("tokenizer.ggml.add_bos_token", G.BOOL, False)


def tokenizer_only(tok_json, out):
    """a vocabulary-only GGUF (no tensors) holding tok_json's tokenizer"""
    w = G.Writer()
    pre = pre_of(json.load(open(tok_json, encoding="utf-8")))
    w.add("general.architecture", G.STRING, {"qwen2": "qwen3", "llama-bpe": "llama"}.get(pre, "gpt2"))
    w.add("general.name", G.STRING, Path(tok_json).stem)
    add_tokenizer(w, tok_json, {})
    w.write(out)


def add_base(w, a, cfg):
    heads = cfg["num_attention_heads"]
    w.add(f"{a}.context_length", G.U32, cfg.get("max_position_embeddings", 32768))
    w.add(f"{a}.embedding_length", G.U32, cfg["hidden_size"])
    w.add(f"{a}.feed_forward_length", G.U32, cfg["intermediate_size"])
    w.add(f"{a}.block_count", G.U32, cfg["num_hidden_layers"])
    w.add(f"{a}.attention.head_count", G.U32, heads)
    w.add(f"{a}.attention.head_count_kv", G.U32, cfg.get("num_key_value_heads", heads))
    hd = cfg.get("head_dim") or cfg["hidden_size"] // heads
    w.add(f"{a}.attention.key_length", G.U32, hd)
    w.add(f"{a}.attention.value_length", G.U32, hd)
    w.add(f"{a}.attention.layer_norm_rms_epsilon", G.F32, cfg["rms_norm_eps"])
    theta = cfg.get("rope_theta", (cfg.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    w.add(f"{a}.rope.freq_base", G.F32, theta)
    w.add(f"{a}.vocab_size", G.U32, cfg["vocab_size"])
    eos = cfg.get("eos_token_id")
    eos = [eos] if isinstance(eos, int) else list(eos or [])
    for key, v in zip(["eos_token_id", "eot_token_id", "eom_token_id"], eos):
        w.add(f"tokenizer.ggml.{key}", G.U32, v)
    if cfg.get("is_causal") is False:
        w.add(f"{a}.attention.causal", G.BOOL, False)


def add_dflash(w, cfg):
    dc = cfg.get("dflash_config", {})
    w.add("dflash.block_size", G.U32, dc.get("block_size", cfg.get("block_size", 16)))
    w.add("tokenizer.ggml.mask_token_id", G.U32, dc["mask_token_id"])
    if "conv_kernel_size" in dc:
        for k in ("conv_kernel_size", "conv_group_size", "selector_rank", "selector_top_k"):
            w.add(f"dflash.{k}", G.U32, int(dc[k]))
    if dc.get("output_multiplier") is not None:
        w.add("dflash.logit_scale", G.F32, float(dc["output_multiplier"]))
    if dc.get("final_logit_softcapping") and float(dc["final_logit_softcapping"]) > 0:
        w.add("dflash.final_logit_softcapping", G.F32, float(dc["final_logit_softcapping"]))
    ids = dc.get("target_layer_ids")
    if not ids:
        raise SystemExit("drafter config has no dflash_config.target_layer_ids")
    w.add_array("dflash.target_layers", G.I32, [i + 1 for i in ids])
    if any(a in DSPARK_ARCHS for a in cfg.get("architectures") or []):
        # DSpark (llama.cpp's keys): row 0 of a block is the anchor, not a prediction slot
        w.add("dflash.sample_from_anchor", G.BOOL, False)
        vd = cfg.get("draft_vocab_size") or cfg["vocab_size"]
        if vd != cfg["vocab_size"]:
            raise SystemExit("a DSpark drafter with a reduced draft vocabulary (d2t) is not converted to GGUF")
    lt = cfg.get("layer_types")
    if lt and "sliding_attention" in lt:
        w.add("dflash.attention.sliding_window", G.U32, cfg["sliding_window"])
        w.add_array("dflash.attention.sliding_window_pattern", G.BOOL,
                    [t == "sliding_attention" for t in lt])


def convert(model_dir, out, want, target_dir=None):
    cfg = json.load(open(Path(model_dir) / "config.json"))
    archs = cfg.get("architectures") or []
    drafter = any(a in ("DFlashDraftModel", "DFlash2DraftModel") + DSPARK_ARCHS for a in archs)
    arch = "dflash" if drafter else cfg["model_type"]
    if arch not in ("dflash", "qwen3", "llama"):
        raise SystemExit(f"{model_dir}: model_type {arch} is not converted (qwen3, llama)")
    w = G.Writer()
    w.add("general.architecture", G.STRING, arch)
    w.add("general.name", G.STRING, Path(model_dir).name)
    w.add("general.file_type", G.U32, FILE_TYPE[want])
    w.add("general.alignment", G.U32, 32)
    add_base(w, arch, cfg)
    if drafter:
        add_dflash(w, cfg)
    tok_dir = target_dir if drafter else model_dir
    add_tokenizer(w, Path(tok_dir) / "tokenizer.json" if tok_dir else None, cfg)
    heads = cfg["num_attention_heads"]
    kv_heads = cfg.get("num_key_value_heads", heads)
    for name, a in sorted(read_safetensors(model_dir).items()):
        gn = gguf_name(name)
        if gn is None:
            raise SystemExit(f"{model_dir}: tensor {name} has no GGUF name")
        if arch == "llama" and gn.endswith("attn_q.weight"):
            a = permute(a, heads)
        elif arch == "llama" and gn.endswith("attn_k.weight"):
            a = permute(a, kv_heads)
        t = tensor_type(gn, a, want)
        w.add_tensor(gn, list(reversed(a.shape)), t, Q.quantize(a, t))
    w.write(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src", help="checkpoint directory, or with --embedded the output directory")
    ap.add_argument("out", nargs="?")
    ap.add_argument("--type", default="F16", choices=list(TYPES))
    ap.add_argument("--target-dir")
    ap.add_argument("--tokenizer-only", action="store_true",
                    help="SRC is a tokenizer.json: write a vocabulary-only GGUF")
    ap.add_argument("--embedded", action="store_true",
                    help="convert models/tiny-qwen3 and its two drafters into SRC/")
    a = ap.parse_args()
    t = TYPES[a.type]
    if a.embedded:
        root = Path(__file__).resolve().parents[2] / "models"
        outdir = Path(a.src)
        outdir.mkdir(parents=True, exist_ok=True)
        sfx = a.type.lower()
        convert(root / "tiny-qwen3", outdir / f"tiny-qwen3-{sfx}.gguf", t)
        for d in ("tiny-qwen3-dflash-b16", "tiny-qwen3-dflash2-b16", "tiny-qwen3-dspark-b16"):
            convert(root / d, outdir / f"{d}-{sfx}.gguf", t, root / "tiny-qwen3")
        return
    if not a.out:
        ap.error("OUT.gguf is required")
    if a.tokenizer_only:
        tokenizer_only(a.src, a.out)
        return
    convert(a.src, a.out, t, a.target_dir)


if __name__ == "__main__":
    main()
