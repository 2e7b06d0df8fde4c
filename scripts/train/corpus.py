"""Training corpus from Debian-installed text plus a generator of arithmetic word problems.

Every sample is a (user, assistant) pair; chat_text() renders it in the chatml template with an
empty <think> block, which is how the target is trained and how prompts are rendered later.
"""
import ast
import glob
import os
import random
import re
import subprocess
import textwrap

PACKAGES = ["fortunes", "fortunes-min", "wordnet-base", "python3.11-doc", "libpython3.11-stdlib"]
BUILD_PACKAGES = ["libopenblas0-pthread", "libjemalloc2", "python3-torch", "python3-numpy", "python3-regex"]


def ensure_packages():
    need = []
    for p in PACKAGES + BUILD_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Status}", p], capture_output=True, text=True)
        if "install ok installed" not in r.stdout:
            need.append(p)
    if need:
        env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
        subprocess.run(["apt-get", "update"], check=False, env=env)
        subprocess.run(["apt-get", "install", "-y", "--no-install-recommends"] + need, check=True, env=env)


def package_versions():
    out = {}
    for p in PACKAGES + BUILD_PACKAGES:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", p], capture_output=True, text=True)
        out[p] = r.stdout.strip() or "not installed"
    return out


def chat_prompt(user):
    return "<|im_start|>user\n" + user + "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"


def chat_text(user, assistant):
    return chat_prompt(user) + assistant + "<|im_end|>"


# ---------------------------------------------------------------- math word problems
NAMES = ["Tom", "Anna", "Ben", "Lily", "Sam", "Maria", "Jack", "Emma", "Leo", "Mia", "Omar", "Nina",
         "Paul", "Rosa", "Ivan", "Zoe", "Carl", "Dana", "Eli", "Fay", "Hugo", "Iris", "Kai", "Lena"]
ITEMS = ["apples", "pencils", "books", "marbles", "cookies", "stickers", "cards", "eggs", "flowers",
         "coins", "shells", "toys", "candies", "stamps", "balloons", "oranges", "cupcakes", "rocks"]
BOXES = ["bags", "boxes", "packs", "baskets", "jars", "crates", "trays", "bundles"]
PLACES = ["the store", "the market", "school", "the fair", "the library", "the bakery"]


def _math_problem(rng):
    n = rng.choice(NAMES)
    m = rng.choice([x for x in NAMES if x != n])
    it = rng.choice(ITEMS)
    bx = rng.choice(BOXES)
    kind = rng.randrange(8)
    if kind == 0:
        a, b, c = rng.randint(2, 60), rng.randint(2, 12), rng.randint(2, 12)
        q = f"{n} has {a} {it}. {n} buys {b} {bx} with {c} {it} in each. How many {it} does {n} have now?"
        s1 = b * c
        t = a + s1
        sol = (f"Step 1: {n} buys {b} {bx} with {c} {it} each, so {b} * {c} = {s1} {it}.\n"
               f"Step 2: Add them to the {a} {it} {n} already has: {a} + {s1} = {t}.\n"
               f"The answer is {t}.")
    elif kind == 1:
        a = rng.randint(20, 200)
        b = rng.randint(1, a // 2)
        c = rng.randint(1, a - b)
        t = a - b - c
        q = f"{n} had {a} {it}. {n} gave {b} to {m} and lost {c} at {rng.choice(PLACES)}. How many {it} are left?"
        sol = (f"Step 1: After giving {b} to {m}, {n} has {a} - {b} = {a - b} {it}.\n"
               f"Step 2: After losing {c}, {n} has {a - b} - {c} = {t} {it}.\n"
               f"The answer is {t}.")
    elif kind == 2:
        p, k, c = rng.randint(2, 20), rng.randint(2, 15), rng.randint(1, 9) * 10
        cost = p * k
        chg = c + cost
        q = (f"One of the {it} costs {p} dollars. {n} buys {k} of them and pays with {chg} dollars. "
             f"How much change does {n} get?")
        sol = (f"Step 1: The {it} cost {k} * {p} = {cost} dollars.\n"
               f"Step 2: The change is {chg} - {cost} = {c} dollars.\n"
               f"The answer is {c}.")
    elif kind == 3:
        per, d, w = rng.randint(2, 30), rng.randint(2, 7), rng.randint(2, 6)
        day = per * d
        t = day * w
        q = f"{n} reads {per} pages a day for {d} days each week. How many pages does {n} read in {w} weeks?"
        sol = (f"Step 1: In one week {n} reads {per} * {d} = {day} pages.\n"
               f"Step 2: In {w} weeks {n} reads {day} * {w} = {t} pages.\n"
               f"The answer is {t}.")
    elif kind == 4:
        g, each = rng.randint(2, 12), rng.randint(2, 15)
        tot = g * each
        q = f"{n} shares {tot} {it} equally among {g} friends. How many {it} does each friend get?"
        sol = (f"Step 1: Divide the {tot} {it} among {g} friends: {tot} / {g} = {each}.\n"
               f"The answer is {each}.")
    elif kind == 5:
        a, b = rng.randint(2, 50), rng.randint(2, 50)
        f = rng.randint(2, 5)
        mb = b * f
        t = a + mb
        q = (f"{n} has {a} {it}. {m} has {f} times as many {it} as the {b} {it} in the box. "
             f"How many {it} do {n} and {m} have together?")
        sol = (f"Step 1: {m} has {f} * {b} = {mb} {it}.\n"
               f"Step 2: Together they have {a} + {mb} = {t} {it}.\n"
               f"The answer is {t}.")
    elif kind == 6:
        s, h = rng.randint(3, 90), rng.randint(2, 9)
        d = s * h
        extra = rng.randint(1, 50)
        t = d + extra
        q = (f"A car drives at {s} miles per hour for {h} hours, then {extra} more miles. "
             f"How far does it drive in total?")
        sol = (f"Step 1: In {h} hours the car drives {s} * {h} = {d} miles.\n"
               f"Step 2: Adding {extra} more miles gives {d} + {extra} = {t} miles.\n"
               f"The answer is {t}.")
    else:
        a, b, c = rng.randint(5, 80), rng.randint(5, 80), rng.randint(5, 80)
        s = a + b
        t = s + c
        q = (f"On Monday {n} picked {a} {it}, on Tuesday {b} {it}, and on Wednesday {c} {it}. "
             f"How many {it} did {n} pick in all?")
        sol = (f"Step 1: Monday and Tuesday give {a} + {b} = {s} {it}.\n"
               f"Step 2: Adding Wednesday gives {s} + {c} = {t} {it}.\n"
               f"The answer is {t}.")
    return q, sol


def math_samples(n, seed):
    rng = random.Random(seed)
    return [_math_problem(rng) for _ in range(n)]


# ---------------------------------------------------------------- code (Python stdlib)
def _py_files():
    fs = sorted(glob.glob("/usr/lib/python3.11/**/*.py", recursive=True))
    return [f for f in fs if "/test" not in f and "site-packages" not in f and "dist-packages" not in f]


_CODE_CACHE = {}


def code_samples(split, seed, max_samples=None):
    """Functions of the stdlib, user asks for them by name.  split: 'train' or 'eval'
    (a file-hash split so eval prompts name functions the target has not seen)."""
    if split not in _CODE_CACHE:
        _CODE_CACHE[split] = _code_samples(split)
    out = list(_CODE_CACHE[split])
    random.Random(seed).shuffle(out)
    return out[:max_samples] if max_samples else out


def _code_samples(split):
    out = []
    for f in _py_files():
        h = sum(f.encode()) % 10
        if (split == "eval") != (h == 0):
            continue
        try:
            src = open(f, encoding="utf-8").read()
            tree = ast.parse(src)
        except Exception:
            continue
        mod = os.path.relpath(f, "/usr/lib/python3.11")[:-3].replace("/", ".")
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                seg = ast.get_source_segment(src, node)
                if not seg:
                    continue
                seg = textwrap.dedent(" " * node.col_offset + seg)
                lines = seg.split("\n")
                if not (3 <= len(lines) <= 30) or len(seg) > 1400:
                    continue
                args = ", ".join(a.arg for a in node.args.args)
                q = f"Write the Python function {node.name}({args}) from the {mod} module."
                out.append((q, "```python\n" + seg + "\n```"))
    return out


# ---------------------------------------------------------------- chat (fortunes, WordNet, docs)
def fortune_samples():
    out = []
    asks = ["Tell me a fortune.", "Say something wise.", "Share a quote with me.", "Tell me something funny.",
            "Give me a saying.", "What is your fortune for today?"]
    rng = random.Random(11)
    for f in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if f.endswith(".dat") or f.endswith(".u8") or os.path.isdir(f):
            continue
        try:
            txt = open(f, encoding="utf-8", errors="replace").read()
        except Exception:
            continue
        topic = os.path.basename(f)
        if topic in ("ascii-art", "art"):
            continue
        for item in txt.split("\n%\n"):
            item = item.strip()
            if 10 < len(item) < 700:
                q = rng.choice(asks) if rng.random() < 0.5 else f"Tell me a fortune about {topic}."
                out.append((q, item))
    return out


def wordnet_samples():
    out = []
    pos_name = {"noun": "noun", "verb": "verb", "adj": "adjective", "adv": "adverb"}
    rng = random.Random(12)
    for pos in ["noun", "verb", "adj", "adv"]:
        path = f"/usr/share/wordnet/data.{pos}"
        if not os.path.exists(path):
            continue
        for line in open(path, encoding="latin-1"):
            if line.startswith("  "):
                continue
            if "|" not in line:
                continue
            head, gloss = line.split("|", 1)
            parts = head.split()
            try:
                wcnt = int(parts[3], 16)
            except Exception:
                continue
            words = [parts[4 + 2 * i].replace("_", " ") for i in range(wcnt)]
            words = [re.sub(r"\(.*\)$", "", w) for w in words]
            gloss = gloss.strip()
            defs = [g.strip() for g in gloss.split(";")]
            ex = [d.strip('"') for d in defs if d.startswith('"')]
            dd = [d for d in defs if not d.startswith('"')]
            if not dd:
                continue
            w = words[0]
            ans = f"{w} ({pos_name[pos]}): {'; '.join(dd)}."
            if len(words) > 1:
                ans += " Similar words: " + ", ".join(words[1:]) + "."
            if ex:
                ans += " Example: \"" + ex[0] + "\""
            q = rng.choice([f"What does the word \"{w}\" mean?", f"Define {w}.", f"What is the meaning of {w}?"])
            out.append((q, ans))
    return out


def doc_samples():
    out = []
    root = "/usr/share/doc/python3.11/html/_sources"
    for f in sorted(glob.glob(root + "/**/*.txt", recursive=True)):
        try:
            txt = open(f, encoding="utf-8").read()
        except Exception:
            continue
        lines = txt.split("\n")
        title = None
        for i in range(1, len(lines)):
            if re.fullmatch(r"[=\-~^*]{4,}", lines[i].strip()) and lines[i - 1].strip() and not re.fullmatch(r"[=\-~^*]+", lines[i - 1].strip()):
                title = lines[i - 1].strip()
        paras = [p.strip() for p in txt.split("\n\n")]
        topic = os.path.relpath(f, root)[:-8]
        cur = topic
        for p in paras:
            pl = p.split("\n")
            if len(pl) >= 2 and re.fullmatch(r"[=\-~^*]{4,}", pl[-1].strip()):
                cur = pl[-2].strip()
                continue
            if p.startswith("..") or p.startswith(">>>") or len(p) < 120 or len(p) > 1200:
                continue
            out.append((f"Explain {cur} in Python.", re.sub(r"\s*\n\s*", " ", p)))
    return out


def chat_samples():
    return fortune_samples() + wordnet_samples() + doc_samples()


def tokenizer_training_text(seed=1, limit_chars=4_000_000):
    rng = random.Random(seed)
    parts = []
    for q, a in math_samples(6000, seed + 100):
        parts.append(chat_text(q, a))
    code = code_samples("train", seed)
    chat = chat_samples()
    rng.shuffle(chat)
    for q, a in code[:3000]:
        parts.append(chat_text(q, a))
    for q, a in chat[:12000]:
        parts.append(chat_text(q, a))
    rng.shuffle(parts)
    text = "<|endoftext|>".join(parts)
    return text[:limit_chars]
