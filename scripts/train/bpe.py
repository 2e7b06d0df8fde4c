"""Byte-level BPE: trainer, encoder/decoder and a Qwen2-form Hugging Face tokenizer.json writer.

Encoding follows the Hugging Face semantics the C tokenizer implements: added (special) tokens
are split out first, the rest is pre-tokenized with the Qwen2 regex, mapped through the GPT-2
byte-to-unicode table, and each piece is merged by merge rank (lowest rank first).
"""
import json
from collections import defaultdict

import regex

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
_PAT = regex.compile(QWEN2_REGEX)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


B2U = bytes_to_unicode()
U2B = {v: k for k, v in B2U.items()}
_SPECIAL_SPLIT = regex.compile("(" + "|".join(regex.escape(s) for s in SPECIAL_TOKENS) + ")")


def _split_special(text):
    for part in _SPECIAL_SPLIT.split(text):
        if part:
            yield part, part in SPECIAL_TOKENS


def train_bpe(text, vocab_size):
    """Returns (vocab: dict str->id, merges: list[(str,str)], special ids dict)."""
    n_merges = vocab_size - 256 - len(SPECIAL_TOKENS)
    wc = defaultdict(int)
    for part, sp in _split_special(text):
        if sp:
            continue
        for w in _PAT.findall(part):
            wc[w.encode("utf-8")] += 1
    words = [list(w) for w in wc]  # byte ids 0..255 are the base token ids
    counts = list(wc.values())
    tok_str = [B2U[i] for i in range(256)]
    pair_counts = defaultdict(int)
    where = defaultdict(set)
    for wi, w in enumerate(words):
        c = counts[wi]
        for a, b in zip(w, w[1:]):
            pair_counts[(a, b)] += c
            where[(a, b)].add(wi)
    merges = []
    for _ in range(n_merges):
        if not pair_counts:
            break
        best = max(pair_counts.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))[0]
        if pair_counts[best] < 2:
            break
        new_id = len(tok_str)
        tok_str.append(tok_str[best[0]] + tok_str[best[1]])
        merges.append((tok_str[best[0]], tok_str[best[1]]))
        for wi in list(where[best]):
            w = words[wi]
            c = counts[wi]
            for a, b in zip(w, w[1:]):
                pair_counts[(a, b)] -= c
                if pair_counts[(a, b)] <= 0:
                    del pair_counts[(a, b)]
                where[(a, b)].discard(wi)
            nw = []
            i = 0
            while i < len(w):
                if i + 1 < len(w) and w[i] == best[0] and w[i + 1] == best[1]:
                    nw.append(new_id)
                    i += 2
                else:
                    nw.append(w[i])
                    i += 1
            words[wi] = nw
            for a, b in zip(nw, nw[1:]):
                pair_counts[(a, b)] += c
                where[(a, b)].add(wi)
        where.pop(best, None)
        pair_counts.pop(best, None)
    vocab = {s: i for i, s in enumerate(tok_str)}
    for s in SPECIAL_TOKENS:
        vocab[s] = len(vocab)
    return vocab, merges


def tokenizer_json(vocab, merges):
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [{"id": vocab[s], "content": s, "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True} for s in SPECIAL_TOKENS],
        "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False},
            dict(bl)]},
        "post_processor": dict(bl),
        "decoder": dict(bl),
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": {s: i for s, i in vocab.items() if s not in SPECIAL_TOKENS},
                  "merges": [a + " " + b for a, b in merges]},
    }


class Tokenizer:
    def __init__(self, path):
        j = json.load(open(path, encoding="utf-8"))
        self.vocab = dict(j["model"]["vocab"])
        for t in j["added_tokens"]:
            self.vocab[t["content"]] = t["id"]
        self.id_to_tok = {i: s for s, i in self.vocab.items()}
        self.ranks = {}
        for r, m in enumerate(j["model"]["merges"]):
            a, b = m.split(" ") if isinstance(m, str) else m
            self.ranks[(a, b)] = r
        self.special = {t["content"]: t["id"] for t in j["added_tokens"]}
        self.cache = {}

    def _bpe(self, piece):
        word = [B2U[b] for b in piece.encode("utf-8")]
        while len(word) > 1:
            best, br = None, None
            for i in range(len(word) - 1):
                r = self.ranks.get((word[i], word[i + 1]))
                if r is not None and (br is None or r < br):
                    best, br = i, r
            if best is None:
                break
            a, b = word[best], word[best + 1]
            nw, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and word[i] == a and word[i + 1] == b:
                    nw.append(a + b)
                    i += 2
                else:
                    nw.append(word[i])
                    i += 1
            word = nw
        return [self.vocab[t] for t in word]

    def encode(self, text):
        out = []
        for part, sp in _split_special(text):
            if sp:
                out.append(self.special[part])
                continue
            for w in _PAT.findall(part):
                ids = self.cache.get(w)
                if ids is None:
                    ids = self._bpe(w)
                    self.cache[w] = ids
                out.extend(ids)
        return out

    def decode(self, ids):
        out = bytearray()
        for i in ids:
            s = self.id_to_tok[int(i)]
            if s in self.special:
                out += s.encode()
            else:
                out += bytes(U2B[c] for c in s)
        return out.decode("utf-8", errors="replace")
