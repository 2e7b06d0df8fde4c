"""quants.py - reference quantizer and dequantizer of the GGUF block types (numpy).

Written from the published block layouts (backends/quant.c repeats them); independent of the
C code, so the C dequantizer and this one agreeing bit for bit on random blocks checks both.

Types and their numbers in a GGUF file (ggml type ids):
  F32 0, F16 1, Q4_0 2, Q8_0 8, Q4_K 12, Q5_K 13, Q6_K 14, BF16 30.

Dequantization is float32 arithmetic in the order of the layout's formula (one rounding per
operation, numpy float32 ops never fuse). The quantizers are simple, not llama.cpp's search:
  Q8_0  d = amax / 127, q = round(x / d)
  Q4_0  d = m / -8 with m the value of largest magnitude, q = min(15, trunc(x / d + 8.5))
  Q4_K / Q5_K  per sub-block of 32: scale = (max - min0) / qmax, min0 = min(0, min x); the eight
        scales and mins quantized to 6 bits against d = max scale / 63, dmin = max min / 63;
        q = round((x + dmin m) / (d s)) clamped to [0, qmax]
  Q6_K  per sub-block of 16: scale = amax / 31; int8 scales against d = max |scale| / 127;
        q = round(x / (d sc)) clamped to [-32, 31]
"""
import numpy as np

F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 13, 14, 30
NAMES = {F32: "F32", F16: "F16", BF16: "BF16", Q8_0: "Q8_0", Q4_0: "Q4_0", Q4_K: "Q4_K",
         Q5_K: "Q5_K", Q6_K: "Q6_K"}
BLOCK = {F32: 1, F16: 1, BF16: 1, Q8_0: 32, Q4_0: 32, Q4_K: 256, Q5_K: 256, Q6_K: 256}
BYTES = {F32: 4, F16: 2, BF16: 2, Q8_0: 34, Q4_0: 18, Q4_K: 144, Q5_K: 176, Q6_K: 210}

f32 = np.float32


def _f16(a):
    """float32 -> float16 bits (round to nearest even) as uint16"""
    return np.asarray(a, dtype=np.float32).astype(np.float16).view(np.uint16)


def _h2f(u16):
    return np.asarray(u16, dtype=np.uint16).view(np.float16).astype(np.float32)


def _bf16(x):
    u = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    nan = (u & 0x7FFFFFFF) > 0x7F800000
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    r[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)
    return r


def _round(a):
    """round half away from zero, as C's roundf"""
    return np.sign(a) * np.floor(np.abs(a) + f32(0.5))


def _safe_inv(d):
    with np.errstate(divide="ignore"):
        return np.where(d != 0, f32(1) / np.where(d != 0, d, f32(1)), f32(0)).astype(np.float32)


# ---------------------------------------------------------------------------- quantizers

def _q8_0(x):
    x = x.reshape(-1, 32)
    d = (np.abs(x).max(axis=1) / f32(127)).astype(np.float32)
    dh = _f16(d)
    q = np.clip(_round(x * _safe_inv(d)[:, None]), -127, 127).astype(np.int8)
    out = np.zeros((x.shape[0], 34), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q.view(np.uint8)
    return out


def _q4_0(x):
    x = x.reshape(-1, 32)
    idx = np.abs(x).argmax(axis=1)
    m = x[np.arange(x.shape[0]), idx]
    d = (m / f32(-8)).astype(np.float32)
    q = np.minimum(15, np.trunc(x * _safe_inv(d)[:, None] + f32(8.5))).astype(np.int64)
    q = np.clip(q, 0, 15).astype(np.uint8)
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = _f16(d).view(np.uint8).reshape(-1, 2)
    out[:, 2:] = q[:, :16] | (q[:, 16:] << 4)
    return out


def _pack_scales_k4(s, m):
    """eight 6-bit scales s[:, 8] and mins m[:, 8] -> the 12-byte packing"""
    sc = np.zeros((s.shape[0], 12), np.uint8)
    for j in range(4):
        sc[:, j] = (s[:, j] & 63) | ((s[:, j + 4] >> 4) << 6)
        sc[:, j + 4] = (m[:, j] & 63) | ((m[:, j + 4] >> 4) << 6)
        sc[:, j + 8] = (s[:, j + 4] & 15) | ((m[:, j + 4] & 15) << 4)
    return sc


def _qk45(x, qmax):
    x = x.reshape(-1, 8, 32)
    mn = np.minimum(x.min(axis=2), f32(0))
    scale = ((x.max(axis=2) - mn) / f32(qmax)).astype(np.float32)
    mins = (-mn).astype(np.float32)
    d = (scale.max(axis=1) / f32(63)).astype(np.float32)
    dmin = (mins.max(axis=1) / f32(63)).astype(np.float32)
    dh, dminh = _f16(d), _f16(dmin)
    s = np.clip(_round(scale * _safe_inv(d)[:, None]), 0, 63).astype(np.uint8)
    m = np.clip(_round(mins * _safe_inv(dmin)[:, None]), 0, 63).astype(np.uint8)
    de = (_h2f(dh)[:, None] * s.astype(np.float32)).astype(np.float32)
    me = (_h2f(dminh)[:, None] * m.astype(np.float32)).astype(np.float32)
    q = _round((x + me[:, :, None]) * _safe_inv(de)[:, :, None])
    q = np.clip(q, 0, qmax).astype(np.uint8)  # [nb, 8, 32]
    return dh, dminh, _pack_scales_k4(s, m), q


def _q4_k(x):
    dh, dminh, sc, q = _qk45(x, 15)
    nb = q.shape[0]
    out = np.zeros((nb, 144), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dminh.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = sc
    for c in range(4):
        out[:, 16 + 32 * c:16 + 32 * c + 32] = q[:, 2 * c] | (q[:, 2 * c + 1] << 4)
    return out


def _q5_k(x):
    dh, dminh, sc, q = _qk45(x, 31)
    nb = q.shape[0]
    out = np.zeros((nb, 176), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = dminh.view(np.uint8).reshape(-1, 2)
    out[:, 4:16] = sc
    qh = np.zeros((nb, 32), np.uint8)
    for c in range(4):
        lo, hi = q[:, 2 * c], q[:, 2 * c + 1]
        out[:, 48 + 32 * c:48 + 32 * c + 32] = (lo & 15) | ((hi & 15) << 4)
        qh |= ((lo >> 4) << (2 * c)) | ((hi >> 4) << (2 * c + 1))
    out[:, 16:48] = qh
    return out


def _q6_k(x):
    x = x.reshape(-1, 16, 16)
    nb = x.shape[0]
    scale = (np.abs(x).max(axis=2) / f32(31)).astype(np.float32)
    d = (scale.max(axis=1) / f32(127)).astype(np.float32)
    dh = _f16(d)
    sc = np.clip(_round(scale * _safe_inv(d)[:, None]), -128, 127).astype(np.int8)
    de = (_h2f(dh)[:, None] * sc.astype(np.float32)).astype(np.float32)
    q = np.clip(_round(x * _safe_inv(de)[:, :, None]), -32, 31).astype(np.int64) + 32
    q = q.reshape(nb, 256).astype(np.uint8)
    out = np.zeros((nb, 210), np.uint8)
    for h in range(2):
        v = q[:, 128 * h:128 * h + 128]
        q0, q1, q2, q3 = v[:, 0:32], v[:, 32:64], v[:, 64:96], v[:, 96:128]
        out[:, 64 * h:64 * h + 32] = (q0 & 15) | ((q2 & 15) << 4)
        out[:, 64 * h + 32:64 * h + 64] = (q1 & 15) | ((q3 & 15) << 4)
        out[:, 128 + 32 * h:128 + 32 * h + 32] = ((q0 >> 4) | ((q1 >> 4) << 2) |
                                                  ((q2 >> 4) << 4) | ((q3 >> 4) << 6))
    out[:, 192:208] = sc.view(np.uint8)
    out[:, 208:210] = dh.view(np.uint8).reshape(-1, 2)
    return out


# -------------------------------------------------------------------------- dequantizers

def _scale_min_k4(sc):
    """[nb, 12] packed -> s, m [nb, 8] (int)"""
    sc = sc.astype(np.int64)
    s = np.zeros((sc.shape[0], 8), np.int64)
    m = np.zeros_like(s)
    for j in range(8):
        if j < 4:
            s[:, j] = sc[:, j] & 63
            m[:, j] = sc[:, j + 4] & 63
        else:
            s[:, j] = (sc[:, j + 4] & 15) | ((sc[:, j - 4] >> 6) << 4)
            m[:, j] = (sc[:, j + 4] >> 4) | ((sc[:, j] >> 6) << 4)
    return s, m


def _dq_q8_0(b):
    d = _h2f(b[:, 0:2].copy().view(np.uint16))
    q = b[:, 2:].copy().view(np.int8).astype(np.float32)
    return (d * q).reshape(-1)


def _dq_q4_0(b):
    d = _h2f(b[:, 0:2].copy().view(np.uint16))
    qs = b[:, 2:].astype(np.int64)
    q = np.concatenate([(qs & 15) - 8, (qs >> 4) - 8], axis=1).astype(np.float32)
    return (d * q).reshape(-1)


def _dq_qk45(b, five):
    nb = b.shape[0]
    d = _h2f(b[:, 0:2].copy().view(np.uint16)).reshape(-1)
    dmin = _h2f(b[:, 2:4].copy().view(np.uint16)).reshape(-1)
    s, m = _scale_min_k4(b[:, 4:16])
    qs = b[:, 48:176] if five else b[:, 16:144]
    qh = b[:, 16:48].astype(np.int64) if five else None
    y = np.zeros((nb, 256), np.float32)
    for c in range(4):
        for half in range(2):
            j = 2 * c + half
            v = qs[:, 32 * c:32 * c + 32].astype(np.int64)
            q = (v >> 4) if half else (v & 15)
            if five:
                q = q + (((qh >> j) & 1) << 4)
            dj = (d * s[:, j].astype(np.float32)).astype(np.float32)
            mj = (dmin * m[:, j].astype(np.float32)).astype(np.float32)
            y[:, 32 * j:32 * j + 32] = dj[:, None] * q.astype(np.float32) - mj[:, None]
    return y.reshape(-1)


def _dq_q6_k(b):
    nb = b.shape[0]
    d = _h2f(b[:, 208:210].copy().view(np.uint16)).reshape(-1)
    scs = b[:, 192:208].copy().view(np.int8).astype(np.float32)
    y = np.zeros((nb, 256), np.float32)
    for h in range(2):
        ql = b[:, 64 * h:64 * h + 64].astype(np.int64)
        qh = b[:, 128 + 32 * h:128 + 32 * h + 32].astype(np.int64)
        sc = scs[:, 8 * h:8 * h + 8]
        qs = [((ql[:, 0:32] & 15) | (((qh >> 0) & 3) << 4)) - 32,
              ((ql[:, 32:64] & 15) | (((qh >> 2) & 3) << 4)) - 32,
              ((ql[:, 0:32] >> 4) | (((qh >> 4) & 3) << 4)) - 32,
              ((ql[:, 32:64] >> 4) | (((qh >> 6) & 3) << 4)) - 32]
        for k in range(4):
            for l16 in range(2):
                ds = (d * sc[:, l16 + 2 * k]).astype(np.float32)
                sl = slice(16 * l16, 16 * l16 + 16)
                y[:, 128 * h + 32 * k + 16 * l16:128 * h + 32 * k + 16 * l16 + 16] = \
                    ds[:, None] * qs[k][:, sl].astype(np.float32)
    return y.reshape(-1)


_QUANT = {Q8_0: _q8_0, Q4_0: _q4_0, Q4_K: _q4_k, Q5_K: _q5_k, Q6_K: _q6_k}
_DEQUANT = {Q8_0: _dq_q8_0, Q4_0: _dq_q4_0, Q4_K: lambda b: _dq_qk45(b, False),
            Q5_K: lambda b: _dq_qk45(b, True), Q6_K: _dq_q6_k}


def quantize(x, t):
    """float array (size a multiple of the block) -> uint8 bytes of type t"""
    x = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    if t == F32:
        return x.view(np.uint8)
    if t == F16:
        return _f16(x).view(np.uint8)
    if t == BF16:
        return _bf16(x).view(np.uint8)
    if x.size % BLOCK[t]:
        raise ValueError(f"{NAMES[t]}: {x.size} values is not a multiple of {BLOCK[t]}")
    return _QUANT[t](x).reshape(-1)


def dequantize(b, t):
    """uint8 bytes of type t -> float32 values"""
    b = np.ascontiguousarray(b, dtype=np.uint8).reshape(-1)
    if t == F32:
        return b.view(np.float32).copy()
    if t == F16:
        return _h2f(b.view(np.uint16))
    if t == BF16:
        return (b.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return _DEQUANT[t](b.reshape(-1, BYTES[t]))


def nbytes(t, n):
    return n // BLOCK[t] * BYTES[t]
