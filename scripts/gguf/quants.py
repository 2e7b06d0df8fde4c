"""quants.py - reference quantizer and dequantizer of the GGUF block types (numpy).

Written from the published block layouts (backends/quant.c repeats them); independent of the
C code, so the C dequantizer and this one agreeing bit for bit on random blocks checks both.

Types and their numbers in a GGUF file (ggml type ids):
  F32 0, F16 1, Q4_0 2, Q4_1 3, Q5_0 6, Q5_1 7, Q8_0 8, Q2_K 10, Q3_K 11, Q4_K 12, Q5_K 13, Q6_K 14,
  IQ4_NL 20, IQ4_XS 23, BF16 30.

Dequantization is float32 arithmetic in the order of the layout's formula (one rounding per
operation, numpy float32 ops never fuse). The quantizers are simple, not llama.cpp's search:
  Q8_0  d = amax / 127, q = round(x / d)
  Q4_0  d = m / -8 with m the value of largest magnitude, q = min(15, trunc(x / d + 8.5))
  Q4_K / Q5_K  per sub-block of 32: scale = (max - min0) / qmax, min0 = min(0, min x); the eight
        scales and mins quantized to 6 bits against d = max scale / 63, dmin = max min / 63;
        q = round((x + dmin m) / (d s)) clamped to [0, qmax]
  Q6_K  per sub-block of 16: scale = amax / 31; int8 scales against d = max |scale| / 127;
        q = round(x / (d sc)) clamped to [-32, 31]
  Q4_1 / Q5_1  d = (max - min) / qmax, m = min, q = round((x - m) / d) clamped to [0, qmax]
  Q5_0  as Q4_0 with 16 levels each side: d = m / -16, q = min(31, trunc(x / d + 16.5))
  Q2_K  per sub-block of 16 as Q4_K (qmax 3), 4-bit scales and mins against max / 15
  Q3_K  per sub-block of 16: scale = m / -4 (m the value of largest magnitude), 6-bit signed
        scales against d = max |scale| / 31; q = round(x / (d (s - 32))) clamped to [-4, 3]
  IQ4_NL  d = m / -127; q = the nearest of the 16 levels to x / d
  IQ4_XS  per sub-block of 32: scale m / -127, 6-bit signed scales against max |scale| / 31;
        q = the nearest level to x / (d (s - 32))
"""
import numpy as np

F32, F16, Q4_0, Q8_0, Q4_K, Q5_K, Q6_K, BF16 = 0, 1, 2, 8, 12, 13, 14, 30
Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, IQ4_NL, IQ4_XS = 3, 6, 7, 10, 11, 20, 23
NAMES = {F32: "F32", F16: "F16", BF16: "BF16", Q8_0: "Q8_0", Q4_0: "Q4_0", Q4_K: "Q4_K",
         Q5_K: "Q5_K", Q6_K: "Q6_K", Q4_1: "Q4_1", Q5_0: "Q5_0", Q5_1: "Q5_1", Q2_K: "Q2_K",
         Q3_K: "Q3_K", IQ4_NL: "IQ4_NL", IQ4_XS: "IQ4_XS"}
BLOCK = {F32: 1, F16: 1, BF16: 1, Q8_0: 32, Q4_0: 32, Q4_K: 256, Q5_K: 256, Q6_K: 256,
         Q4_1: 32, Q5_0: 32, Q5_1: 32, Q2_K: 256, Q3_K: 256, IQ4_NL: 32, IQ4_XS: 256}
BYTES = {F32: 4, F16: 2, BF16: 2, Q8_0: 34, Q4_0: 18, Q4_K: 144, Q5_K: 176, Q6_K: 210,
         Q4_1: 20, Q5_0: 22, Q5_1: 24, Q2_K: 84, Q3_K: 110, IQ4_NL: 18, IQ4_XS: 136}
# the 16 levels of IQ4_NL / IQ4_XS
IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113],
                      np.int64)

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


def _put_f16(out, col, v):
    out[:, col:col + 2] = _f16(v).view(np.uint8).reshape(-1, 2)


def _pack_nibbles(q):
    """[nb, 32] values 0..15 -> [nb, 16] bytes: value i low nibble of byte i, i + 16 the high"""
    return (q[:, :16] | (q[:, 16:] << 4)).astype(np.uint8)


def _q41_51(x, five):
    x = x.reshape(-1, 32)
    qmax = 31 if five else 15
    mn, mx = x.min(axis=1), x.max(axis=1)
    d = ((mx - mn) / f32(qmax)).astype(np.float32)
    dh, mh = _f16(d), _f16(mn)
    q = _round((x - _h2f(mh)[:, None]) * _safe_inv(_h2f(dh))[:, None])
    q = np.clip(q, 0, qmax).astype(np.uint8)
    out = np.zeros((x.shape[0], 24 if five else 20), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:4] = mh.view(np.uint8).reshape(-1, 2)
    if five:
        out[:, 4:8] = _pack_qh(q)
        out[:, 8:] = _pack_nibbles(q & 15)
    else:
        out[:, 4:] = _pack_nibbles(q)
    return out


def _pack_qh(q):
    """the fifth bits of [nb, 32] values as a little-endian u32 -> [nb, 4] bytes"""
    bits = ((q >> 4) & 1).astype(np.uint32)
    u = (bits << np.arange(32, dtype=np.uint32)[None, :]).sum(axis=1, dtype=np.uint64).astype(np.uint32)
    return u.astype("<u4").view(np.uint8).reshape(-1, 4)


def _q5_0(x):
    x = x.reshape(-1, 32)
    idx = np.abs(x).argmax(axis=1)
    m = x[np.arange(x.shape[0]), idx]
    d = (m / f32(-16)).astype(np.float32)
    q = np.clip(np.minimum(31, np.trunc(x * _safe_inv(d)[:, None] + f32(16.5))), 0, 31).astype(np.uint8)
    out = np.zeros((x.shape[0], 22), np.uint8)
    _put_f16(out, 0, d)
    out[:, 2:6] = _pack_qh(q)
    out[:, 6:] = _pack_nibbles(q & 15)
    return out


def _nearest_level(v):
    """index of the IQ4 level nearest to each v"""
    return np.abs(v[..., None] - IQ4_LEVELS.astype(np.float32)).argmin(axis=-1).astype(np.uint8)


def _iq4_nl(x):
    x = x.reshape(-1, 32)
    idx = np.abs(x).argmax(axis=1)
    d = (x[np.arange(x.shape[0]), idx] / f32(-127)).astype(np.float32)
    dh = _f16(d)
    q = _nearest_level(x * _safe_inv(_h2f(dh))[:, None])
    out = np.zeros((x.shape[0], 18), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 2:] = _pack_nibbles(q)
    return out


def _iq4_xs(x):
    x = x.reshape(-1, 8, 32)
    nb = x.shape[0]
    idx = np.abs(x).argmax(axis=2)
    sub = (np.take_along_axis(x, idx[:, :, None], 2)[:, :, 0] / f32(-127)).astype(np.float32)
    d = (np.abs(sub).max(axis=1) / f32(31)).astype(np.float32)
    dh = _f16(d)
    ls = np.clip(_round(sub * _safe_inv(_h2f(dh))[:, None]), -32, 31).astype(np.int64) + 32
    de = (_h2f(dh)[:, None] * (ls - 32).astype(np.float32)).astype(np.float32)
    q = _nearest_level(x * _safe_inv(de)[:, :, None])
    out = np.zeros((nb, 136), np.uint8)
    out[:, 0:2] = dh.view(np.uint8).reshape(-1, 2)
    sh = np.zeros(nb, np.uint32)
    for j in range(8):
        sh |= ((ls[:, j] >> 4) & 3).astype(np.uint32) << (2 * j)
        out[:, 4 + j // 2] |= ((ls[:, j] & 15) << (4 * (j % 2))).astype(np.uint8)
        out[:, 8 + 16 * j:24 + 16 * j] = _pack_nibbles(q[:, j])
    out[:, 2:4] = sh.astype("<u2").view(np.uint8).reshape(-1, 2)
    return out


def _k2bits(q, nb):
    """[nb, 16, 16] 2-bit values -> the 64 qs bytes of Q2_K / Q3_K (sub-block j: bits 2k of
    byte 32h + 16(j%2) + l, h = j / 8, k = (j % 8) / 2)"""
    qs = np.zeros((nb, 64), np.uint8)
    for j in range(16):
        h, k, off = j // 8, (j % 8) // 2, 16 * (j % 2)
        qs[:, 32 * h + off:32 * h + off + 16] |= ((q[:, j] & 3) << (2 * k)).astype(np.uint8)
    return qs


def _q2_k(x):
    x = x.reshape(-1, 16, 16)
    nb = x.shape[0]
    mn = np.minimum(x.min(axis=2), f32(0))
    scale = ((x.max(axis=2) - mn) / f32(3)).astype(np.float32)
    mins = (-mn).astype(np.float32)
    d = (scale.max(axis=1) / f32(15)).astype(np.float32)
    dmin = (mins.max(axis=1) / f32(15)).astype(np.float32)
    dh, dminh = _f16(d), _f16(dmin)
    s = np.clip(_round(scale * _safe_inv(_h2f(dh))[:, None]), 0, 15).astype(np.uint8)
    m = np.clip(_round(mins * _safe_inv(_h2f(dminh))[:, None]), 0, 15).astype(np.uint8)
    de = (_h2f(dh)[:, None] * s.astype(np.float32)).astype(np.float32)
    me = (_h2f(dminh)[:, None] * m.astype(np.float32)).astype(np.float32)
    q = np.clip(_round((x + me[:, :, None]) * _safe_inv(de)[:, :, None]), 0, 3).astype(np.uint8)
    out = np.zeros((nb, 84), np.uint8)
    out[:, 0:16] = s | (m << 4)
    out[:, 16:80] = _k2bits(q, nb)
    out[:, 80:82] = dh.view(np.uint8).reshape(-1, 2)
    out[:, 82:84] = dminh.view(np.uint8).reshape(-1, 2)
    return out


def _q3_k(x):
    x = x.reshape(-1, 16, 16)
    nb = x.shape[0]
    idx = np.abs(x).argmax(axis=2)
    sub = (np.take_along_axis(x, idx[:, :, None], 2)[:, :, 0] / f32(-4)).astype(np.float32)
    d = (np.abs(sub).max(axis=1) / f32(31)).astype(np.float32)
    dh = _f16(d)
    ls = np.clip(_round(sub * _safe_inv(_h2f(dh))[:, None]), -32, 31).astype(np.int64) + 32
    de = (_h2f(dh)[:, None] * (ls - 32).astype(np.float32)).astype(np.float32)
    q = np.clip(_round(x * _safe_inv(de)[:, :, None]), -4, 3).astype(np.int64) + 4  # 0..7
    out = np.zeros((nb, 110), np.uint8)
    hm = np.zeros((nb, 32), np.uint8)
    for j in range(16):
        h, k, off = j // 8, (j % 8) // 2, 16 * (j % 2)
        hm[:, off:off + 16] |= (((q[:, j] >> 2) & 1) << (4 * h + k)).astype(np.uint8)
    out[:, 0:32] = hm
    out[:, 32:96] = _k2bits(q & 3, nb)
    sc = np.zeros((nb, 12), np.uint8)
    for j in range(16):
        lo, hi2 = ls[:, j] & 15, (ls[:, j] >> 4) & 3
        sc[:, (j & 4) + j % 4] |= (lo << (0 if j < 8 else 4)).astype(np.uint8)
        sc[:, 8 + j % 4] |= (hi2 << (2 * (j // 4))).astype(np.uint8)
    out[:, 96:108] = sc
    out[:, 108:110] = dh.view(np.uint8).reshape(-1, 2)
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


def _nibbles(qs):
    """[nb, 16] bytes -> [nb, 32] ints: low nibbles then high nibbles"""
    qs = qs.astype(np.int64)
    return np.concatenate([qs & 15, qs >> 4], axis=1)


def _fifth_bits(qh4):
    """[nb, 4] bytes (a little-endian u32) -> [nb, 32] bits, bit i for value i"""
    u = qh4.copy().view("<u4").astype(np.int64).reshape(-1, 1)
    return (u >> np.arange(32)[None, :]) & 1


def _dq_q41_51(b, five):
    d = _h2f(b[:, 0:2].copy().view(np.uint16))
    m = _h2f(b[:, 2:4].copy().view(np.uint16))
    q = _nibbles(b[:, 8:24] if five else b[:, 4:20])
    if five:
        q = q | (_fifth_bits(b[:, 4:8]) << 4)
    return ((d * q.astype(np.float32)).astype(np.float32) + m).reshape(-1)


def _dq_q5_0(b):
    d = _h2f(b[:, 0:2].copy().view(np.uint16))
    q = (_nibbles(b[:, 6:22]) | (_fifth_bits(b[:, 2:6]) << 4)) - 16
    return (d * q.astype(np.float32)).reshape(-1)


def _dq_iq4_nl(b):
    d = _h2f(b[:, 0:2].copy().view(np.uint16))
    return (d * IQ4_LEVELS[_nibbles(b[:, 2:18])].astype(np.float32)).reshape(-1)


def _dq_iq4_xs(b):
    nb = b.shape[0]
    d = _h2f(b[:, 0:2].copy().view(np.uint16)).reshape(-1)
    sh = b[:, 2:4].copy().view("<u2").astype(np.int64).reshape(-1)
    sl = b[:, 4:8].astype(np.int64)
    y = np.zeros((nb, 8, 32), np.float32)
    for j in range(8):
        ls = ((sl[:, j // 2] >> (4 * (j % 2))) & 15) | (((sh >> (2 * j)) & 3) << 4)
        dj = (d * (ls - 32).astype(np.float32)).astype(np.float32)
        lv = IQ4_LEVELS[_nibbles(b[:, 8 + 16 * j:24 + 16 * j])].astype(np.float32)
        y[:, j] = dj[:, None] * lv
    return y.reshape(-1)


def _k2bits_unpack(qs):
    """the 64 qs bytes of Q2_K / Q3_K -> [nb, 16, 16] 2-bit values (sub-block, element)"""
    qs = qs.astype(np.int64).reshape(-1, 2, 2, 16)  # [nb, half, odd, l]
    v = np.stack([(qs >> (2 * k)) & 3 for k in range(4)], axis=2)  # [nb, half, k, odd, l]
    return v.reshape(-1, 16, 16)


def _dq_q2_k(b):
    d = _h2f(b[:, 80:82].copy().view(np.uint16)).reshape(-1, 1)
    dmin = _h2f(b[:, 82:84].copy().view(np.uint16)).reshape(-1, 1)
    sc = b[:, 0:16].astype(np.int64)
    dj = (d * (sc & 15).astype(np.float32)).astype(np.float32)
    mj = (dmin * (sc >> 4).astype(np.float32)).astype(np.float32)
    q = _k2bits_unpack(b[:, 16:80]).astype(np.float32)
    return ((dj[:, :, None] * q).astype(np.float32) - mj[:, :, None]).reshape(-1)


def _dq_q3_k(b):
    nb = b.shape[0]
    d = _h2f(b[:, 108:110].copy().view(np.uint16)).reshape(-1, 1)
    sc = b[:, 96:108].astype(np.int64)
    ls = np.zeros((nb, 16), np.int64)
    for j in range(16):
        byte = sc[:, (j & 4) + j % 4]
        lo = (byte & 15) if j < 8 else (byte >> 4)
        ls[:, j] = lo | (((sc[:, 8 + j % 4] >> (2 * (j // 4))) & 3) << 4)
    hm = b[:, 0:32].astype(np.int64).reshape(-1, 1, 1, 2, 16)  # [nb, ., ., odd, l]
    bit = np.arange(8).reshape(1, 2, 4, 1, 1)  # half h, k -> bit 4h + k
    high = ((hm >> bit) & 1).reshape(nb, 16, 16)
    q = _k2bits_unpack(b[:, 32:96]) - 4 * (1 - high)
    dj = (d * (ls - 32).astype(np.float32)).astype(np.float32)
    return (dj[:, :, None] * q.astype(np.float32)).reshape(-1)


_QUANT = {Q8_0: _q8_0, Q4_0: _q4_0, Q4_K: _q4_k, Q5_K: _q5_k, Q6_K: _q6_k,
          Q4_1: lambda x: _q41_51(x, False), Q5_0: _q5_0, Q5_1: lambda x: _q41_51(x, True),
          Q2_K: _q2_k, Q3_K: _q3_k, IQ4_NL: _iq4_nl, IQ4_XS: _iq4_xs}
_DEQUANT = {Q8_0: _dq_q8_0, Q4_0: _dq_q4_0, Q4_K: lambda b: _dq_qk45(b, False),
            Q5_K: lambda b: _dq_qk45(b, True), Q6_K: _dq_q6_k,
            Q4_1: lambda b: _dq_q41_51(b, False), Q5_0: _dq_q5_0,
            Q5_1: lambda b: _dq_q41_51(b, True), Q2_K: _dq_q2_k, Q3_K: _dq_q3_k,
            IQ4_NL: _dq_iq4_nl, IQ4_XS: _dq_iq4_xs}


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
