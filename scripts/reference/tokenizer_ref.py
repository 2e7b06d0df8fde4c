#!/usr/bin/python3
"""Reference byte-level BPE encode/decode from a Hugging Face tokenizer.json, written apart from
the C tokenizer (src/tokenizer*.c) so that one checks the other. Needs python3-regex.

Pipeline (Hugging Face `tokenizers`, add_special_tokens=False):
  added tokens cut out first (leftmost, then longest; special ones only with allow_special)
  -> normalizer (NFC) -> pre-tokenizer splits (regex matches and gaps both kept)
  -> GPT-2 byte-to-unicode -> BPE: repeatedly merge every occurrence of the lowest-rank pair
  (the original GPT-2 loop, not the heap the C code uses; both give the same ids).
Decode: each token's characters mapped back to bytes (a token with a character outside the table
stands for its own UTF-8), joined, then bytes.decode("utf-8", errors="replace").

Usage:
  tokenizer_ref.py TOKENIZER.json encode "text"     ids, comma separated
  tokenizer_ref.py TOKENIZER.json decode 1,2,3      text
"""
import json
import sys
import unicodedata

import regex

GPT2_PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def bytes_to_unicode():
    """GPT-2's table: printable Latin-1 bytes stand for themselves, the rest get U+0100.."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


BYTE_TO_CHAR = bytes_to_unicode()
CHAR_TO_BYTE = {c: b for b, c in BYTE_TO_CHAR.items()}


class Tokenizer:
    def __init__(self, path):
        with open(path, encoding="utf-8") as f:
            j = json.load(f)
        model = j["model"]
        if model.get("type", "BPE") != "BPE":
            raise ValueError(f"unsupported tokenizer type {model['type']}")
        self.vocab = dict(model["vocab"])
        self.ignore_merges = bool(model.get("ignore_merges", False))
        self.ranks = {}
        for rank, m in enumerate(model["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = rank
        self.added = [(t["content"], t["id"], t.get("special", False), t.get("lstrip", False),
                       t.get("rstrip", False)) for t in j.get("added_tokens") or []]
        self.id_to_token = {i: s for s, i in self.vocab.items()}
        for content, i, *_ in self.added:
            self.id_to_token[i] = content
        self.special_ids = {i for _, i, sp, _, _ in self.added if sp}
        self.nfc = self._normalizer(j.get("normalizer"))
        self.add_prefix_space = False
        self.splits = []
        self._pretok(j.get("pre_tokenizer"))

    def _normalizer(self, n):
        if not n:
            return False
        if n["type"] == "NFC":
            return True
        if n["type"] == "Sequence":
            return any(self._normalizer(x) for x in n["normalizers"])
        raise ValueError(f"unsupported normalizer {n['type']}")

    def _pretok(self, p):
        if not p:
            return
        t = p["type"]
        if t == "Sequence":
            for x in p["pretokenizers"]:
                self._pretok(x)
        elif t == "ByteLevel":
            self.add_prefix_space = self.add_prefix_space or p.get("add_prefix_space", False)
            if p.get("use_regex", True):
                self.splits.append(regex.compile(GPT2_PATTERN))
        elif t == "Split":
            pat = p["pattern"]
            self.splits.append(regex.compile(pat["Regex"] if "Regex" in pat else regex.escape(pat["String"])))
        elif t == "Digits":
            self.splits.append(regex.compile(r"\p{N}" if p.get("individual_digits") else r"\p{N}+"))
        else:
            raise ValueError(f"unsupported pre_tokenizer {t}")

    # ---- encode
    def _split_added(self, text, allow_special):
        """[(piece, id or None)]: added tokens matched leftmost, then longest."""
        cands = [a for a in self.added if allow_special or not a[2]]
        out, seg, i = [], 0, 0
        while i < len(text):
            best = None
            for content, tid, _, lstrip, rstrip in cands:
                if text.startswith(content, i) and (best is None or len(content) > len(best[0])):
                    best = (content, tid, lstrip, rstrip)
            if best is None:
                i += 1
                continue
            start, end = i, i + len(best[0])
            if best[2]:
                while start > seg and text[start - 1] in " \t\n\v\f\r":
                    start -= 1
            if best[3]:
                while end < len(text) and text[end] in " \t\n\v\f\r":
                    end += 1
            if start > seg:
                out.append((text[seg:start], None))
            out.append((None, best[1]))
            seg = i = end
        if seg < len(text):
            out.append((text[seg:], None))
        return out

    def _pieces(self, text, step=0):
        if step == len(self.splits):
            yield text
            return
        last = 0
        for m in self.splits[step].finditer(text):
            if m.end() == m.start():
                continue
            if m.start() > last:
                yield from self._pieces(text[last:m.start()], step + 1)
            yield from self._pieces(m.group(), step + 1)
            last = m.end()
        if last < len(text):
            yield from self._pieces(text[last:], step + 1)

    def _bpe(self, piece):
        word = [BYTE_TO_CHAR[b] for b in piece.encode("utf-8")]
        if self.ignore_merges and "".join(word) in self.vocab:
            return [self.vocab["".join(word)]]
        while len(word) > 1:
            pairs = [(self.ranks.get((word[k], word[k + 1])), k) for k in range(len(word) - 1)]
            pairs = [p for p in pairs if p[0] is not None]
            if not pairs:
                break
            a, b = word[min(pairs)[1]], word[min(pairs)[1] + 1]
            merged, k = [], 0
            while k < len(word):
                if k + 1 < len(word) and word[k] == a and word[k + 1] == b:
                    merged.append(a + b)
                    k += 2
                else:
                    merged.append(word[k])
                    k += 1
            word = merged
        return [self.vocab[w] for w in word]

    def encode(self, text, allow_special=True):
        ids = []
        for seg, tid in self._split_added(text, allow_special):
            if tid is not None:
                ids.append(tid)
                continue
            if self.nfc:
                seg = unicodedata.normalize("NFC", seg)
            if self.add_prefix_space and not seg.startswith(" "):
                seg = " " + seg
            for piece in self._pieces(seg):
                ids.extend(self._bpe(piece))
        return ids

    # ---- decode
    def token_bytes(self, i):
        s = self.id_to_token[i]
        if all(c in CHAR_TO_BYTE for c in s):
            return bytes(CHAR_TO_BYTE[c] for c in s)
        return s.encode("utf-8")

    def decode(self, ids, skip_special=False):
        raw = b"".join(self.token_bytes(i) for i in ids if i in self.id_to_token
                       and not (skip_special and i in self.special_ids))
        return raw.decode("utf-8", errors="replace")


def main():
    if len(sys.argv) != 4 or sys.argv[2] not in ("encode", "decode"):
        sys.exit(__doc__)
    tok = Tokenizer(sys.argv[1])
    if sys.argv[2] == "encode":
        print(",".join(str(i) for i in tok.encode(sys.argv[3])))
    else:
        sys.stdout.write(tok.decode([int(x) for x in sys.argv[3].replace(",", " ").split()]))


if __name__ == "__main__":
    main()
