"""gguf_file.py - a minimal GGUF v3 writer (numpy), written from the format's description.

Layout: "GGUF", u32 version 3, u64 tensor count, u64 metadata count; metadata (u64-length
string key, u32 value type, value); tensor infos (name, u32 n_dims, u64 ne[n_dims] innermost
first, u32 ggml type, u64 offset into the data section); zero padding to the alignment; the data
section, every tensor starting at a multiple of the alignment. Little-endian throughout.

Value types: u8 0, i8 1, u16 2, i16 3, u32 4, i32 5, f32 6, bool 7, string 8, array 9 (u32
element type, u64 count, elements), u64 10, i64 11, f64 12.
"""
import struct

import numpy as np

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
_FMT = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f", BOOL: "<?",
        U64: "<Q", I64: "<q", F64: "<d"}


def _str(s):
    b = s.encode("utf-8") if isinstance(s, str) else bytes(s)
    return struct.pack("<Q", len(b)) + b


def _val(t, v):
    if t == STRING:
        return _str(v)
    return struct.pack(_FMT[t], v)


class Writer:
    def __init__(self, alignment=32):
        self.kv = []        # (key, type, value, elem type)
        self.tensors = []   # (name, ne, ggml type, bytes)
        self.alignment = alignment

    def add(self, key, vtype, value):
        self.kv.append((key, vtype, value, None))

    def add_array(self, key, elem, values):
        self.kv.append((key, ARRAY, list(values), elem))

    def add_tensor(self, name, ne, ggml_type, data):
        """ne innermost first (ne[0] = columns of a row-major matrix); data: the raw bytes"""
        self.tensors.append((name, [int(x) for x in ne], int(ggml_type),
                             np.ascontiguousarray(data).view(np.uint8).reshape(-1)))

    def header(self):
        out = bytearray(b"GGUF")
        out += struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for key, t, v, elem in self.kv:
            out += _str(key) + struct.pack("<I", t)
            if t == ARRAY:
                out += struct.pack("<IQ", elem, len(v))
                for e in v:
                    out += _val(elem, e)
            else:
                out += _val(t, v)
        off = 0
        for name, ne, gt, data in self.tensors:
            out += _str(name) + struct.pack("<I", len(ne))
            out += b"".join(struct.pack("<Q", x) for x in ne)
            out += struct.pack("<IQ", gt, off)
            off += (data.size + self.alignment - 1) // self.alignment * self.alignment
        return bytes(out)

    def write(self, path):
        hdr = self.header()
        with open(path, "wb") as f:
            f.write(hdr)
            f.write(b"\0" * (-len(hdr) % self.alignment))
            for _, _, _, data in self.tensors:
                f.write(data.tobytes())
                f.write(b"\0" * (-data.size % self.alignment))
