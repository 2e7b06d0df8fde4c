#!/usr/bin/python3
"""Write the tokenizer test fixtures under tests/data/tokenizer/: a small byte-level BPE
tokenizer trained here (fixed seed, pure stdlib + python3-regex) in four tokenizer.json
dialects, and golden.json with the ids scripts/reference/tokenizer_ref.py gives for a UTF-8
torture corpus.

  tokenizer.json         Qwen2 layout: NFC normalizer, Split(Qwen2 regex) + ByteLevel, "a b" merges
  tokenizer-pairs.json   the same tokenizer with merges as ["a", "b"] pairs (newer files)
  tokenizer-gpt2.json    GPT-2 layout: ByteLevel pre-tokenizer with use_regex (its built-in regex)
  tokenizer-llama3.json  LLaMA-3 layout: Split(LLaMA-3 regex), ignore_merges, the LLaMA-3 chat
                         specials instead of the chatml ones, and an added token with lstrip/rstrip
  tokenizer-seq.json     Sequence normalizer [NFC]; pre-tokenizer Digits (individual) + Split on the
                         literal string "--" + ByteLevel with add_prefix_space and use_regex
  golden.json            {"texts": [...], "encode": {file: [[ids]...]}, "encode_plain": {...}
                          (special tokens as text), "decode": [{"ids", "text"}] (invalid UTF-8)}

Usage: scripts/reference/make_tokenizer_fixture.py [OUT_DIR]
       scripts/reference/make_tokenizer_fixture.py --goldens TOKENIZER_JSON OUT_JSON
The second form writes goldens for another tokenizer (models/tiny-qwen3/tokenizer.json ->
tests/data/tokenizer/golden-tiny-qwen3.json): the torture corpus plus the first prompts of each
built-in dataset in the chatml template, in the same layout as golden.json.
"""
import json
import os
import random
import unicodedata
import sys
from collections import Counter

import regex

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from tokenizer_ref import BYTE_TO_CHAR, Tokenizer  # noqa: E402

QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|mask|>"]
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                   "<|eot_id|>"]
N_VOCAB = 512  # 256 bytes + merges + the 4 specials

WORDS = ("the of and to in is that it for was on are as with his they at be this from have or by one had "
         "not but what all were when we there can an your which their said if do will each about how up out "
         "them then she many some so these would other into has more her two like him see time could no "
         "make than first been its who now people my made over did down only way find use may water long "
         "little very after words called just where most know get through back much before go good new "
         "write our used me man too any day same right look think also around another came come work three "
         "word must because does part even place well such here take why things help put years different "
         "number reason step answer final solution problem function return value list string integer").split()
CODE = ["def add(a, b):\n    return a + b\n", "for i in range(10):\n    print(i * i)\n",
        "if x is None:\n    raise ValueError('missing x')\n", "class Point:\n    def __init__(self, x, y):\n"
        "        self.x = x\n        self.y = y\n", "while n > 0:\n    n //= 2\n    steps += 1\n",
        "result = [v for v in values if v % 2 == 0]\n", "import math\nprint(math.sqrt(16))\n"]
OTHER = ["你好，世界！", "这是一个测试。", "数学题：三加四等于七。", "日本語のテキスト", "안녕하세요",
         "Привет, мир!", "Γειά σου κόσμε", "café naïve résumé", "😀 👍 🎉", "Ünïcödé ßtraße",
         "I'm sure you're right, we'll see. They'd know. It's fine, isn't it?",
         "The answer is \\boxed{42}.", "3.14159 + 2.71828 = 5.85987", "1,000,000 apples; 250 pears."]


def corpus(seed):
    rng = random.Random(seed)
    parts = []
    for _ in range(3000):
        n = rng.randint(4, 14)
        s = " ".join(rng.choice(WORDS) for _ in range(n))
        s = s[0].upper() + s[1:] + rng.choice([".", ".", "?", "!", ","])
        if rng.random() < 0.2:
            s += " " + str(rng.randint(0, 99999))
        parts.append(s)
        if rng.random() < 0.1:
            parts.append(rng.choice(CODE))
        if rng.random() < 0.08:
            parts.append(rng.choice(OTHER))
    return "\n".join(parts)


def train(text, n_merges):
    pat = regex.compile(QWEN2_REGEX)
    counts = Counter(pat.findall(text))
    words = {tuple(BYTE_TO_CHAR[b] for b in w.encode("utf-8")): c for w, c in counts.items()}
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in words.items():
            for a, b in zip(w, w[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))[0]  # ties: larger pair, deterministic
        merges.append(best)
        new_words = {}
        for w, c in words.items():
            out, k = [], 0
            while k < len(w):
                if k + 1 < len(w) and (w[k], w[k + 1]) == best:
                    out.append(w[k] + w[k + 1])
                    k += 2
                else:
                    out.append(w[k])
                    k += 1
            new_words[tuple(out)] = new_words.get(tuple(out), 0) + c
        words = new_words
    return merges


def added(content, i, special=True, lstrip=False, rstrip=False):
    return {"id": i, "content": content, "single_word": False, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": not special, "special": special}


def tokenizer_json(vocab, merges, variant):
    bl = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False, "use_regex": False}
    toks = [added(s, vocab[s]) for s in SPECIALS]
    pre = {"type": "Sequence", "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": QWEN2_REGEX}, "behavior": "Isolated", "invert": False}, dict(bl)]}
    normalizer = {"type": "NFC"}
    model_vocab = {s: i for s, i in vocab.items() if s not in SPECIALS}
    ignore = False
    if variant == "gpt2":
        pre = dict(bl, use_regex=True)
        normalizer = None
    elif variant == "llama3":
        pre["pretokenizers"][0]["pattern"]["Regex"] = LLAMA3_REGEX
        normalizer = None
        ignore = True
        n = len(vocab) - len(SPECIALS)  # the LLaMA-3 specials replace the chatml ones
        toks = [added(s, n + k) for k, s in enumerate(LLAMA3_SPECIALS)]
        toks.append(added("<tool>", n + len(LLAMA3_SPECIALS), special=False, lstrip=True, rstrip=True))
    elif variant == "seq":
        normalizer = {"type": "Sequence", "normalizers": [{"type": "NFC"}]}
        pre = {"type": "Sequence", "pretokenizers": [
            {"type": "Digits", "individual_digits": True},
            {"type": "Split", "pattern": {"String": "--"}, "behavior": "Isolated", "invert": False},
            dict(bl, add_prefix_space=True, use_regex=True)]}
    merge_list = [list(m) for m in merges] if variant == "pairs" else [a + " " + b for a, b in merges]
    return {"version": "1.0", "truncation": None, "padding": None, "added_tokens": toks,
            "normalizer": normalizer, "pre_tokenizer": pre, "post_processor": dict(bl), "decoder": dict(bl),
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                      "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False,
                      "ignore_merges": ignore, "vocab": model_vocab, "merge_list": None, "merges": merge_list}}


def torture_texts():
    return [
        "Hello world", "", " ", "x", "  leading and trailing  ", "The quick brown fox jumps over the lazy dog.",
        "I'm sure you're right; we'LL see what they'D say. It's DON'T, isn't it? 'S 'Ll",
        "curly quotes: it’s don’t “quoted”",
        "12345 3.14159 1,000,000 2024-01-31 0x1F 1e-9 ٣٤٥ ⅷ ²³",
        "a1b22c333d4444e55555",
        "你好，世界！这是一个测试。数学：三加四等于七。", "日本語のテキストとカタカナ、ひらがな。", "안녕하세요 세계",
        "Привет, мир! Γειά σου κόσμε. שלום עולם مرحبا بالعالم नमस्ते สวัสดี",
        "emoji: 😀👍🏽🎉 family 👨‍👩‍👧‍👦 flag 🏳️‍🌈 🇯🇵 heart ❤️ keycap 1️⃣",
        "combining: e\u0301 a\u0308 n\u0303 A\u030a \u212b \u2126 q\u0307\u0323 \u1100\u1161\u11a8 \u00c5",
        "control: \x01\x02\x07\x1b[0m\x7f bell\x07 \x1c\x1d\x1e\x1f end",
        "tabs\tand\x0bvertical\x0cfeeds\t\t\tx",
        "line1\r\nline2\r\n\r\nline4\rline5\n",
        " " * 40 + "x" + " " * 17 + "y" + " " * 5, "\n" * 12 + "z", "   \n\n   \t\t  \n x", "trailing spaces   ",
        "def f(x):\n    return x**2  # square\n\n\nclass A:\n\tpass\n",
        "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
        "abc<|endoftext|>def<|mask|><|mask|> <|im_end|>", "<|im_start", "<|im_end|<|im_end|>>", "<|<|im_start|>|>",
        "math: ∑∫√∞≠≤≥ ∀x∈ℝ, x²≥0", "zero width: a\u200bb\u200cc\u200dd\ufeffe", "nbsp: a\u00a0b\u2007c\u202fd",
        "separators: a\u2028b\u2029c\u0085d\u3000e\u1680f \u180e g\u180e",
        "supercalifragilisticexpialidocious " * 3, "https://example.com/path?q=1&r=2#frag",
        "!!!???...---___***", "\\boxed{42} $x^2 + y^2 = z^2$",
        "Mixed: The café serves naïve crème brûlée for 12.50€ — 😋 (とても美味しい)!",
        "<tool> call </tool>  <tool>\n\nend",
        "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>",
    ]


def invalid_decode_cases():
    return [[0xE4, 0xBD], [0xFF], [0xC0, 0xAF], [0xED, 0xA0, 0x80], [0xF4, 0x90, 0x80, 0x80],
            [0x61, 0xE4, 0x62, 0xF0, 0x9F, 0x98], [0x80, 0x80, 0x41], [0xF0, 0x9F, 0x98, 0x80, 0xF0, 0x9F],
            [0xE2, 0x82, 0xAC, 0xC3], [0xFE, 0xFF, 0xC3, 0xA9]]


def chat_prompts(root, per_set=4):
    """the first prompts of each built-in set, as chatml prompts with thinking off"""
    fields = {"math": "question", "math-hard": "problem", "code": "prompt", "code-basic": "text", "chat": "turns"}
    out = []
    for name, field in fields.items():
        with open(os.path.join(root, "datasets", name + ".jsonl"), encoding="utf-8") as f:
            for line in f.readlines()[:per_set]:
                v = json.loads(line)[field]
                user = v[0] if isinstance(v, list) else v
                out.append("<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n")
    return out


def goldens_for(tok_path, out_path, root):
    tok = Tokenizer(tok_path)
    texts = torture_texts() + chat_prompts(root)
    g = {"tokenizer": os.path.relpath(tok_path, root), "texts": texts,
         "encode": [tok.encode(t) for t in texts], "encode_plain": [tok.encode(t, allow_special=False) for t in texts]}
    with open(out_path, "w", encoding="utf-8") as f:
        json.dump(g, f, ensure_ascii=False)
        f.write("\n")
    print(f"{out_path}: {len(texts)} texts, {sum(len(x) for x in g['encode'])} ids")


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    if len(sys.argv) == 4 and sys.argv[1] == "--goldens":
        return goldens_for(sys.argv[2], sys.argv[3], root)
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "tests", "data", "tokenizer")
    os.makedirs(out, exist_ok=True)
    merges = train(corpus(seed=5), N_VOCAB - 256 - len(SPECIALS))
    vocab = {BYTE_TO_CHAR[b]: b for b in range(256)}
    for a, b in merges:
        vocab[a + b] = len(vocab)
    for s in SPECIALS:
        vocab[s] = len(vocab)
    files = {"tokenizer.json": "qwen2", "tokenizer-pairs.json": "pairs", "tokenizer-gpt2.json": "gpt2",
             "tokenizer-llama3.json": "llama3", "tokenizer-seq.json": "seq"}
    for name, variant in files.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(tokenizer_json(vocab, merges, variant), f, ensure_ascii=False, indent=1)
    texts = torture_texts()
    golden = {"texts": texts, "encode": {}, "encode_plain": {}, "decode": []}
    for name in files:
        tok = Tokenizer(os.path.join(out, name))
        golden["encode"][name] = [tok.encode(t) for t in texts]
        golden["encode_plain"][name] = [tok.encode(t, allow_special=False) for t in texts]
        for t, ids in zip(texts, golden["encode"][name]):  # round trip (NFC and lstrip/rstrip aside)
            want = unicodedata.normalize("NFC", t) if tok.nfc else t
            assert tok.decode(ids) == want or (variant == "llama3" and "<tool>" in t) or variant == "seq", (name, t)
    tok = Tokenizer(os.path.join(out, "tokenizer.json"))
    for case in invalid_decode_cases():
        ids = [tok.vocab[BYTE_TO_CHAR[b]] for b in case]
        golden["decode"].append({"bytes": case, "ids": ids, "text": tok.decode(ids)})
    bad = {  # malformed files for the error tests: each breaks one thing of tokenizer.json
        "bad-no-model.json": {"version": "1.0", "added_tokens": []},
        "bad-wordpiece.json": {"model": {"type": "WordPiece", "vocab": {"a": 0}, "unk_token": "[UNK]"}},
        "bad-unigram.json": {"model": {"type": "Unigram", "vocab": [["a", 0.0]]}},
        "bad-regex.json": dict(tokenizer_json(vocab, merges, "qwen2"), pre_tokenizer={
            "type": "Split", "pattern": {"Regex": "(?<=a+)b(("}, "behavior": "Isolated", "invert": False}),
        "bad-merge.json": dict(tokenizer_json(vocab, merges, "qwen2")),
        "bad-metaspace.json": dict(tokenizer_json(vocab, merges, "qwen2"), decoder={"type": "Metaspace"},
                                   pre_tokenizer={"type": "Metaspace", "replacement": "\u2581"}),
    }
    bad["bad-merge.json"]["model"] = dict(bad["bad-merge.json"]["model"], merges=["Ġ w", "zz qq"])
    for name, j in bad.items():
        with open(os.path.join(out, name), "w", encoding="utf-8") as f:
            json.dump(j, f, ensure_ascii=False)
    with open(os.path.join(out, "bad-not-json.json"), "w", encoding="utf-8") as f:
        f.write('{"model": {"type": "BPE", "vocab": {"a": 0,}\n')
    with open(os.path.join(out, "golden.json"), "w", encoding="utf-8") as f:
        json.dump(golden, f, ensure_ascii=False, indent=None)
        f.write("\n")
    print(f"{out}: {len(vocab)} tokens, {len(merges)} merges, {len(texts)} golden texts")


if __name__ == "__main__":
    main()
