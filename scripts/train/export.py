"""Export to the Hugging Face layouts of docs/checkpoints.md: config.json + BF16 model.safetensors
[+ tokenizer.json]."""
import json
import os
import shutil
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "reference"))
from safetensors_io import save_hf_dir  # noqa: E402  (written by the reference agent; single copy)

DIRS = {"target": "tiny-qwen3", "v1": "tiny-qwen3-dflash-b16", "v2": "tiny-qwen3-dflash2-b16",
        "dspark": "tiny-qwen3-dspark-b16"}


def _bf16(sd):
    return {k: v.detach().to(torch.bfloat16).contiguous() for k, v in sd.items()}


def export_all(out, tcfg, tstate, cfgs, dstates, tokenizer_path, build, write_target=True):
    """dstates: {"v1", "v2", "dspark"} -> drafter state dicts.  write_target=False keeps the committed
    (frozen) target as it is."""
    os.makedirs(out, exist_ok=True)
    for key, st in dstates.items():
        d = os.path.join(out, DIRS[key])
        s = _bf16(st)
        assert not any("embed_tokens" in k or "lm_head" in k for k in s)
        save_hf_dir(d, cfgs[key], s, metadata={"source": "scripts/train/build_all"})
    with open(os.path.join(out, "build_info.json"), "w") as f:
        json.dump(build, f, indent=1)
        f.write("\n")
    if not write_target:
        return
    tdir = os.path.join(out, DIRS["target"])
    ts = _bf16(tstate)
    assert "lm_head.weight" not in ts  # tied
    save_hf_dir(tdir, tcfg, ts, metadata={"source": "scripts/train/build_all"})
    shutil.copyfile(tokenizer_path, os.path.join(tdir, "tokenizer.json"))
    with open(os.path.join(tdir, "generation_config.json"), "w") as f:
        json.dump({"eos_token_id": tcfg["eos_token_id"], "do_sample": False}, f, indent=2)
        f.write("\n")
