#!/usr/bin/python3
"""make_quant_golden.py - random blocks of every quantized GGUF type, quantized and dequantized
by the numpy reference (quants.py), written for tests/test_quant.c to compare with the C
dequantizer bit for bit.

Usage: scripts/gguf/make_quant_golden.py OUT.bin   (tests/data/gguf/quant-golden.bin)

File (little-endian): "DBQG", u32 version 1, u32 records; each record: u32 ggml type,
u32 blocks, u32 has_source, the blocks' bytes, f32 dequantized values, and when has_source the
f32 values the blocks were quantized from. Two records per type: blocks quantized from random
data (varied scales, a zero block, a constant block, one outlier), and random bytes whose f16
fields are random finite halves (every bit pattern of the quants and 6-bit scales)."""
import struct
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import quants as Q  # noqa: E402

TYPES = [Q.Q8_0, Q.Q4_0, Q.Q4_K, Q.Q5_K, Q.Q6_K, Q.Q4_1, Q.Q5_0, Q.Q5_1, Q.Q2_K, Q.Q3_K,
         Q.IQ4_NL, Q.IQ4_XS]
F16_FIELDS = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208],
              Q.Q4_1: [0, 2], Q.Q5_0: [0], Q.Q5_1: [0, 2], Q.Q2_K: [80, 82], Q.Q3_K: [108],
              Q.IQ4_NL: [0], Q.IQ4_XS: [0]}


def source(rng, t, nb):
    bs = Q.BLOCK[t]
    x = rng.standard_normal((nb, bs)).astype(np.float32)
    x *= np.exp(rng.uniform(-6, 3, (nb, 1))).astype(np.float32)
    x[:, : bs // 2] += rng.uniform(-1, 1, (nb, 1)).astype(np.float32)  # offsets: K-type mins
    x[0] = 0
    x[1] = 0.75
    x[2, 5] = 40.0
    return x.reshape(-1)


def random_bytes(rng, t, nb):
    b = rng.integers(0, 256, (nb, Q.BYTES[t]), dtype=np.uint8)
    for off in F16_FIELDS[t]:
        h = (rng.standard_normal(nb) * np.exp(rng.uniform(-8, 2, nb))).astype(np.float16)
        b[:, off:off + 2] = h.view(np.uint8).reshape(nb, 2)
    return b.reshape(-1)


def main():
    rng = np.random.default_rng(20261201)
    recs = []
    for t in TYPES:
        nb = 12 if Q.BLOCK[t] == 256 else 48
        x = source(rng, t, nb)
        b = Q.quantize(x, t)
        recs.append((t, nb, b, Q.dequantize(b, t), x))
        b = random_bytes(rng, t, nb)
        recs.append((t, nb, b, Q.dequantize(b, t), None))
    with open(sys.argv[1], "wb") as f:
        f.write(b"DBQG" + struct.pack("<II", 1, len(recs)))
        for t, nb, b, y, x in recs:
            f.write(struct.pack("<III", t, nb, 0 if x is None else 1))
            f.write(b.tobytes())
            f.write(y.astype("<f4").tobytes())
            if x is not None:
                f.write(x.astype("<f4").tobytes())


if __name__ == "__main__":
    main()
