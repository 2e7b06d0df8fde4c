"""Minimal, dependency-free safetensors reader/writer (torch only).

API (stable; imported by the training pipeline):

    save_safetensors(path, tensors: dict[str, torch.Tensor], metadata: dict | None = None)
        Writes F32 / BF16 / F16 tensors (and I64 / I32 / BOOL index tensors).  File layout: 8-byte little-endian header
        length N, then N bytes of JSON header {name: {"dtype", "shape",
        "data_offsets": [begin, end]}, "__metadata__": {str: str}} padded with
        spaces to a multiple of 8, then the raw little-endian data, tensors laid
        out in sorted-name order.

    load_safetensors(path) -> dict[str, torch.Tensor]
        Reads a file written by any conforming writer (F32/BF16/F16, I64/I32/BOOL; other
        dtypes raise ValueError naming the tensor and dtype).  Offsets and shapes
        are validated against the file size.

    load_safetensors_metadata(path) -> dict   (the "__metadata__" entry, or {})

    load_hf_dir(path) -> (config: dict, tensors: dict[str, torch.Tensor])
        A Hugging Face model directory: config.json plus model.safetensors, or a
        sharded checkpoint described by model.safetensors.index.json
        ({"metadata": {...}, "weight_map": {name: shard file}}).

    save_hf_dir(path, config, tensors, shards=1, metadata=None)
        Writes config.json and model.safetensors (shards == 1) or
        model-0000i-of-0000n.safetensors + model.safetensors.index.json.
"""
import json
import os
import struct

import numpy as np
import torch

_DT_TO_STR = {torch.float32: "F32", torch.bfloat16: "BF16", torch.float16: "F16",
              torch.int64: "I64", torch.int32: "I32", torch.bool: "BOOL"}
_STR_TO_DT = {v: k for k, v in _DT_TO_STR.items()}
_ELEM = {"F32": 4, "BF16": 2, "F16": 2, "I64": 8, "I32": 4, "BOOL": 1}


def _tensor_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        # reinterpret the 2-byte payload as int16 (numpy has no bfloat16)
        return t.view(torch.int16).numpy().astype("<i2").tobytes()
    if t.dtype == torch.float16:
        return t.numpy().astype("<f2").tobytes()
    if t.dtype == torch.int64:
        return t.numpy().astype("<i8").tobytes()
    if t.dtype == torch.int32:
        return t.numpy().astype("<i4").tobytes()
    if t.dtype == torch.bool:
        return t.numpy().astype("u1").tobytes()
    return t.numpy().astype("<f4").tobytes()


def save_safetensors(path, tensors, metadata=None):
    header = {}
    blobs = []
    off = 0
    for name in sorted(tensors):
        t = tensors[name]
        if t.dtype not in _DT_TO_STR:
            raise ValueError(f"{name}: unsupported dtype {t.dtype} (F32/BF16/F16/I64/I32/BOOL only)")
        b = _tensor_bytes(t)
        header[name] = {"dtype": _DT_TO_STR[t.dtype], "shape": list(t.shape),
                        "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    hj = json.dumps(header, separators=(",", ":")).encode("utf-8")
    hj += b" " * ((8 - len(hj) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(hj)))
        f.write(hj)
        for b in blobs:
            f.write(b)


def _read_header(data, path):
    if len(data) < 8:
        raise ValueError(f"{path}: file too small for a safetensors header")
    (n,) = struct.unpack("<Q", data[:8])
    if n > len(data) - 8:
        raise ValueError(f"{path}: header length {n} exceeds file size")
    header = json.loads(data[8:8 + n].decode("utf-8"))
    return header, 8 + n


def load_safetensors_metadata(path):
    with open(path, "rb") as f:
        data = f.read()
    header, _ = _read_header(data, path)
    return header.get("__metadata__", {}) or {}


def load_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    header, base = _read_header(data, path)
    avail = len(data) - base
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        dt = info.get("dtype")
        if dt not in _STR_TO_DT:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dt} (F32/BF16/F16/I64/I32/BOOL only)")
        shape = [int(s) for s in info["shape"]]
        b, e = (int(x) for x in info["data_offsets"])
        numel = int(np.prod(shape)) if shape else 1
        if not (0 <= b <= e <= avail) or e - b != numel * _ELEM[dt]:
            raise ValueError(f"{path}: tensor {name}: bad data_offsets {b},{e} for shape {shape} {dt}")
        raw = data[base + b:base + e]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
            t = torch.from_numpy(arr.copy())
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float16)
            t = torch.from_numpy(arr.copy())
        elif dt == "BOOL":
            t = torch.from_numpy(np.frombuffer(raw, dtype="u1").astype(np.bool_).copy())
        elif dt in ("I64", "I32"):
            arr = np.frombuffer(raw, dtype="<i8" if dt == "I64" else "<i4").astype(np.int64)
            t = torch.from_numpy(arr.copy())
        else:
            arr = np.frombuffer(raw, dtype="<i2").astype(np.int16)
            t = torch.from_numpy(arr.copy()).view(torch.bfloat16)
        out[name] = t.reshape(shape)
    return out


def load_hf_dir(path):
    with open(os.path.join(path, "config.json")) as f:
        config = json.load(f)
    single = os.path.join(path, "model.safetensors")
    index = os.path.join(path, "model.safetensors.index.json")
    if os.path.exists(single):
        return config, load_safetensors(single)
    if os.path.exists(index):
        with open(index) as f:
            idx = json.load(f)
        tensors = {}
        for shard in sorted(set(idx["weight_map"].values())):
            part = load_safetensors(os.path.join(path, shard))
            for k, v in part.items():
                if idx["weight_map"].get(k) != shard:
                    raise ValueError(f"{shard}: tensor {k} not mapped to this shard in the index")
                tensors[k] = v
        missing = set(idx["weight_map"]) - set(tensors)
        if missing:
            raise ValueError(f"{path}: tensors listed in the index but missing: {sorted(missing)}")
        return config, tensors
    raise FileNotFoundError(f"{path}: neither model.safetensors nor model.safetensors.index.json")


def save_hf_dir(path, config, tensors, shards=1, metadata=None):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    meta = {"format": "pt"}
    if metadata:
        meta.update(metadata)
    if shards == 1:
        save_safetensors(os.path.join(path, "model.safetensors"), tensors, meta)
        return
    names = sorted(tensors)
    per = (len(names) + shards - 1) // shards
    weight_map = {}
    total = 0
    for s in range(shards):
        fn = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        part = {n: tensors[n] for n in names[s * per:(s + 1) * per]}
        save_safetensors(os.path.join(path, fn), part, meta)
        for n, t in part.items():
            weight_map[n] = fn
            total += t.numel() * t.element_size()
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
        f.write("\n")
