"""Prompts rendered exactly as `dflash-bench run` renders its built-in sets, for self-distillation and
evaluation.

The default sweep sends each built-in sample through the chatml template with thinking off
(`<|im_start|>user\\n TEXT <|im_end|>\\n<|im_start|>assistant\\n<think>\\n\\n</think>\\n\\n`), where TEXT is:
  math        question + MATH_SUFFIX
  code        CODE_PREFIX + prompt + CODE_SUFFIX
  code-basic  text as is
  chat        turn 1; turn 2 follows the model's own answer to turn 1 (reasoning stripped)
(src/text/dataset.c, src/text/chat_template.c).  Training prompts come from the generators of
scripts/datasets/make_datasets.py with other seeds, more code parameters and more chat topics; every
prompt of the committed built-in sets is held out, so nothing measured by `run` was trained on.
default_sweep_samples() picks the samples `run --max-samples N --seed S` measures (the same
xoshiro256** Fisher-Yates shuffle as src/text/dataset.c).
"""
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "scripts", "datasets"))

import make_datasets as md  # noqa: E402

MATH_SUFFIX = "\nPlease reason step by step, and put your final answer within \\boxed{}."
CODE_PREFIX = "Write a solution to the following problem and make sure that it passes the tests:\n```python\n"
CODE_SUFFIX = "\n```"

# topics beyond the built-in chat set's, for the same nine two-turn templates
EXTRA_TOPICS = [
    "a lighthouse keeper's ordinary day", "building a birdhouse with a child", "the rules of basketball",
    "how bread rises", "a long train journey across a desert", "recycling plastic at home",
    "the moons of Jupiter", "planning a surprise birthday party", "learning a second language at forty",
    "how a refrigerator keeps food cold", "a street market at night", "training a puppy",
    "the first airplane flights", "making a budget for a school club", "why leaves change colour in autumn",
    "a village festival in summer", "the life cycle of a butterfly", "organizing a bookshelf",
    "how vaccines are tested", "a camping trip in the rain", "the history of chocolate", "writing a good resume",
    "how bridges carry heavy loads", "a museum of old clocks", "growing tomatoes on a balcony",
    "the migration of whales", "a marathon for first-time runners", "how the internet sends a message",
    "a bakery competition", "repairing a flat bicycle tyre", "the invention of the telephone",
    "choosing a pet for a small apartment", "how glaciers shape valleys", "a robot that tends a garden",
    "the rules of a fair election", "a snowy morning in a small town", "saving energy in winter",
    "the ancient library of Alexandria", "learning to swim as a teenager", "a weekend without a phone",
]


def chatml(messages, thinking=False):
    """src/text/chat_template.c, chatml, add_generation_prompt=1."""
    out = []
    for role, text in messages:
        if role == "assistant" and "</think>" in text:
            text = text[text.rindex("</think>") + 8:].lstrip("\n")
        out.append(f"<|im_start|>{role}\n{text}<|im_end|>\n")
    out.append("<|im_start|>assistant\n" + ("" if thinking else "<think>\n\n</think>\n\n"))
    return "".join(out)


def turn_texts(name, row):
    """The user turns a built-in sample sends (src/text/dataset.c)."""
    if name == "math":
        return [row["question"] + MATH_SUFFIX]
    if name == "math-hard":
        return [row["problem"] + MATH_SUFFIX]
    if name == "code":
        return [CODE_PREFIX + row["prompt"] + CODE_SUFFIX]
    if name == "code-basic":
        return [row["text"]]
    if name == "chat":
        return list(row["turns"])
    raise ValueError(name)


def load_builtin(name):
    with open(os.path.join(ROOT, "datasets", name + ".jsonl"), encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# ------------------------------------------------------------------ the C harness's sample choice
M64 = (1 << 64) - 1


def _splitmix64(state):
    state = (state + 0x9E3779B97F4A7C15) & M64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return state, z ^ (z >> 31)


class Xoshiro256ss:
    def __init__(self, seed):
        self.s = []
        st = seed & M64
        for _ in range(4):
            st, v = _splitmix64(st)
            self.s.append(v)

    def next(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M64  # noqa: E731
        result = (rotl((s[1] * 5) & M64, 7) * 9) & M64
        t = (s[1] << 17) & M64
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result


def default_sweep_samples(name, max_samples=8, seed=0):
    rows = load_builtin(name)
    r = Xoshiro256ss(seed)
    for i in range(len(rows) - 1, 0, -1):
        j = r.next() % (i + 1)
        rows[i], rows[j] = rows[j], rows[i]
    return rows[:max_samples]


# ------------------------------------------------------------------ training prompts
def training_prompts(n_math, n_code, n_code_basic, n_chat, seed):
    """[(family, [user turns])] in the built-in formats, none of them in a committed built-in set."""
    held = {name: {t for row in load_builtin(name) for t in turn_texts(name, row)[:1]}
            for name in ("math", "code", "code-basic", "chat")}
    rng = random.Random(seed)
    out = []
    seen = set()
    while len([1 for f, _ in out if f == "math"]) < n_math:
        q, _ = md.math_problem(rng)
        t = q + MATH_SUFFIX
        if t not in held["math"] and t not in seen:
            seen.add(t)
            out.append(("math", [t]))
    pairs = [(task, k) for task in md.TASKS for k in range(2, 41)]
    rng.shuffle(pairs)
    code, basic = [], []
    for i, (task, k) in enumerate(pairs):
        try:
            he = CODE_PREFIX + md.human_eval(task, k, i)["prompt"] + CODE_SUFFIX
            mb = md.mbpp(task, k, i)["text"]
        except Exception:  # a task whose examples do not work for this parameter
            continue
        if he not in held["code"] and len(code) < n_code:
            code.append(("code", [he]))
        if mb not in held["code-basic"] and len(basic) < n_code_basic:
            basic.append(("code-basic", [mb]))
    combos = [(c, t) for c in md.CHAT for t in md.TOPICS + EXTRA_TOPICS]
    rng.shuffle(combos)
    chat = []
    for c, t in combos:
        t1 = c[1].format(t=t)
        if t1 not in held["chat"] and len(chat) < n_chat:
            chat.append(("chat", [t1, c[2]]))
    return out + code + basic + chat
