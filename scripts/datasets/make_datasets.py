#!/usr/bin/python3
"""Write the built-in prompt sets datasets/{math,math-hard,code,code-basic,chat}.jsonl.

Every prompt is written by this script from templates and a fixed seed (pure stdlib): nothing is
copied from public datasets. Each file mimics the field layout of the public set it stands in for,
so the loader treats both alike:
  math        GSM8K-like word problems            {"question", "answer"}
  math-hard   MATH-500-like problems               {"problem", "answer", "subject", "level", "unique_id"}
  code        HumanEval-like signature + docstring {"task_id", "prompt", "entry_point"}
  code-basic  MBPP-like task statements            {"task_id", "text", "test_list"}
  chat        MT-Bench-like two-turn questions     {"question_id", "category", "turns": [t1, t2]}
Answers and docstring examples are computed, so they are right. Prompts are 20-120 words: a small
model runs them.

Usage: scripts/datasets/make_datasets.py [OUT_DIR]   (default: datasets/ of the source tree)
"""
import json
import math
import os
import random
import sys

N = 80  # prompts per set (>= 64)
SEED = 2024

NAMES = ["Ava", "Ben", "Chloe", "Dev", "Elena", "Farid", "Grace", "Hiro", "Iris", "Jonah", "Kemi", "Liam",
         "Maya", "Nikhil", "Olga", "Pablo", "Quinn", "Rosa", "Sami", "Tara", "Uma", "Victor", "Wen", "Yusuf"]


def words(s):
    return len(s.split())


# ---------------------------------------------------------------- math (GSM8K-like)

def math_problem(rng):
    a = rng.choice(NAMES)
    b = rng.choice([n for n in NAMES if n != a])
    k = rng.randrange(16)
    if k == 0:
        x, y, p = rng.randint(12, 40), rng.randint(3, 9), rng.randint(2, 6)
        return (f"{a} picks {x} apples in the morning and {y} fewer apples in the afternoon. "
                f"{a} sells each apple for ${p}. How much money does {a} make from the apples picked that day?",
                (x + x - y) * p)
    if k == 1:
        w, d, h = rng.randint(12, 25), rng.randint(3, 6), rng.randint(2, 8)
        return (f"{a} earns ${w} per hour at the bookstore. This week {a} worked {d} days for {h} hours each day. "
                f"How many dollars did {a} earn this week?", w * d * h)
    if k == 2:
        t, e = rng.randint(4, 9) * 10, rng.randint(2, 5)
        s = rng.randint(1, 3)
        return (f"A class has {t} students. One {e}th of them walk to school, and {s} times as many as the walkers "
                f"take the bus. The rest are driven by their parents. How many students are driven?",
                t - t // e - s * (t // e)) if t % e == 0 else math_problem(rng)
    if k == 3:
        c, n, g = rng.randint(3, 8), rng.randint(4, 12), rng.randint(2, 5)
        return (f"{a} bakes {n} trays of cookies with {c * g} cookies on each tray. {a} packs the cookies into bags "
                f"of {g}. How many bags does {a} fill?", n * c)
    if k == 4:
        p, d = rng.randint(4, 20) * 10, rng.choice([10, 20, 25, 50])
        return (f"A jacket costs ${p}. During a sale the price is reduced by {d}%. {a} also has a coupon for $5 off "
                f"the sale price. How much does {a} pay for the jacket?", p * (100 - d) // 100 - 5
                ) if p * (100 - d) % 100 == 0 else math_problem(rng)
    if k == 5:
        s, t = rng.randint(40, 70), rng.randint(2, 5)
        r = rng.randint(1, 3)
        return (f"A train travels at {s} miles per hour for {t} hours, stops, and then travels {r} more hours at "
                f"{s + 10} miles per hour. How many miles does the train travel in total?", s * t + r * (s + 10))
    if k == 6:
        x, y = rng.randint(5, 15), rng.randint(2, 4)
        return (f"{a} has {x} marbles. {b} has {y} times as many marbles as {a}. Together they give away half of all "
                f"their marbles to a friend. How many marbles do {a} and {b} have left together?",
                (x + x * y) // 2) if (x + x * y) % 2 == 0 else math_problem(rng)
    if k == 7:
        g, w = rng.randint(3, 9), rng.randint(2, 4)
        return (f"A garden has {g} rows of tomato plants with {g + 2} plants in each row. Each plant gives {w} "
                f"kilograms of tomatoes. How many kilograms of tomatoes does the garden give?", g * (g + 2) * w)
    if k == 8:
        m, e = rng.randint(200, 900), rng.randint(20, 90)
        return (f"{a} saves ${m} for a trip. The bus ticket costs ${e}, the hotel costs three times as much as the "
                f"ticket, and food costs $40. How much money does {a} have left after paying for everything?",
                m - e - 3 * e - 40) if m - 4 * e - 40 > 0 else math_problem(rng)
    if k == 9:
        n, p = rng.randint(3, 7), rng.randint(6, 15)
        return (f"{a} buys {n} notebooks at ${p} each and twice as many pens at $2 each. {a} pays with a "
                f"$200 bill. How much change does {a} get?", 200 - n * p - 2 * n * 2)
    if k == 10:
        d = rng.randint(20, 60)
        return (f"A tank holds {d * 10} liters of water. A pump fills it at {d} liters per minute, but a leak "
                f"loses 5 liters per minute. How many minutes does it take to fill the empty tank?",
                d * 10 // (d - 5)) if (d * 10) % (d - 5) == 0 else math_problem(rng)
    if k == 11:
        y = rng.randint(6, 14)
        return (f"{a} is {y} years old. {b} is 4 years older than twice {a}'s age. In 5 years, what will be the sum "
                f"of their ages?", y + 5 + 2 * y + 4 + 5)
    if k == 12:
        n, c = rng.randint(3, 6), rng.randint(8, 16)
        return (f"A school orders {n} boxes of crayons. Each box has {c} packs, and each pack has 8 crayons. The "
                f"teachers give out all but 20 crayons. How many crayons are given out?", n * c * 8 - 20)
    if k == 13:
        m = rng.randint(3, 9)
        return (f"{a} runs {m} kilometers on Monday, twice that on Wednesday, and 3 kilometers less than Wednesday "
                f"on Friday. How many kilometers does {a} run over the three days?", m + 2 * m + 2 * m - 3)
    if k == 14:
        q, r = rng.randint(10, 30), rng.randint(2, 5)
        return (f"There are {q * r} guests at a party. Each table seats {r} guests, and each table needs 2 vases "
                f"of flowers with 6 flowers per vase. How many flowers are needed?", q * 2 * 6)
    w = rng.randint(12, 30)
    return (f"A rectangle is {w} centimeters long and half as wide. {a} draws a border around it using a ribbon. "
            f"How many centimeters of ribbon does {a} need for the whole border?",
            2 * (w + w // 2)) if w % 2 == 0 else math_problem(rng)


# ---------------------------------------------------------------- math-hard (MATH-500-like)

def hard_problem(rng):
    k = rng.randrange(12)
    if k == 0:
        a, b, c = rng.randint(2, 9), rng.randint(1, 20), rng.randint(21, 60)
        x = (c - b) / a
        if x != int(x):
            return hard_problem(rng)
        return ("Algebra", 1, f"Solve for $x$ in the equation ${a}x + {b} = {c}$, and express the value of $x$ "
                f"as an integer. Show how you isolate the variable.", str(int(x)))
    if k == 1:
        r, s = rng.randint(-9, 9), rng.randint(-9, 9)
        return ("Algebra", 2, f"The quadratic $x^2 {-(r + s):+d}x {r * s:+d} = 0$ has two roots. What is the sum of the "
                f"squares of its roots?", str(r * r + s * s))
    if k == 2:
        n, m = rng.randint(10 ** 5, 10 ** 6), rng.randint(7, 19)
        return ("Number Theory", 2, f"What is the remainder when ${n}$ is divided by ${m}$? Give the remainder as a "
                f"nonnegative integer less than ${m}$.", str(n % m))
    if k == 3:
        a, b = rng.randint(12, 99), rng.randint(12, 99)
        return ("Number Theory", 2, f"Find the least common multiple of ${a}$ and ${b}$, and then divide it by "
                f"their greatest common divisor. What number do you get?", str(a * b // math.gcd(a, b) ** 2))
    if k == 4:
        n, r = rng.randint(6, 12), rng.randint(2, 4)
        return ("Counting & Probability", 2, f"A club has ${n}$ members. In how many ways can the club choose a "
                f"committee of ${r}$ members if the order of selection does not matter?", str(math.comb(n, r)))
    if k == 5:
        t = rng.randint(4, 10)
        cnt = sum(1 for i in range(1, 7) for j in range(1, 7) if i + j == t)
        g = math.gcd(cnt, 36)
        return ("Counting & Probability", 3, f"Two fair six-sided dice are rolled. What is the probability that the "
                f"sum of the numbers shown is ${t}$? Express your answer as a common fraction.",
                f"\\frac{{{cnt // g}}}{{{36 // g}}}")
    if k == 6:
        x1, y1, x2, y2, x3, y3 = (rng.randint(-6, 6) for _ in range(6))
        area2 = abs(x1 * (y2 - y3) + x2 * (y3 - y1) + x3 * (y1 - y2))
        if area2 == 0:
            return hard_problem(rng)
        ans = str(area2 // 2) if area2 % 2 == 0 else f"\\frac{{{area2}}}{{2}}"
        return ("Geometry", 3, f"What is the area of the triangle with vertices $({x1}, {y1})$, $({x2}, {y2})$ and "
                f"$({x3}, {y3})$ in the coordinate plane?", ans)
    if k == 7:
        a, d, n = rng.randint(1, 20), rng.randint(2, 9), rng.randint(10, 40)
        return ("Algebra", 2, f"An arithmetic sequence starts with ${a}$ and each term is ${d}$ more than the one "
                f"before. What is the sum of the first ${n}$ terms of the sequence?", str(n * (2 * a + (n - 1) * d) // 2))
    if k == 8:
        a, b, c = rng.randint(2, 5), rng.randint(-5, 5), rng.randint(1, 4)
        x = rng.randint(-3, 3)
        g = c * x * x
        return ("Intermediate Algebra", 3, f"Let $f(x) = {a}x {b:+d}$ and $g(x) = {c}x^2$. Compute $f(g({x}))$, "
                f"explaining each step of the composition.", str(a * g + b))
    if k == 9:
        n = rng.randint(60, 500)
        return ("Number Theory", 3, f"How many positive divisors does ${n}$ have? List the prime factorization "
                f"first, then count.", str(sum(1 for d in range(1, n + 1) if n % d == 0)))
    if k == 10:
        n, b = rng.randint(50, 999), rng.choice([2, 3, 5, 7, 8])
        digits, m = "", n
        while m:
            digits = str(m % b) + digits
            m //= b
        return ("Number Theory", 2, f"Express the base-ten number ${n}$ in base ${b}$. Give the digits of the "
                f"result without a subscript.", digits)
    a, b = rng.randint(2, 9), rng.randint(10, 50)
    return ("Prealgebra", 2, f"How many positive integers $n$ satisfy the inequality ${a}n + 3 < {b}$? Explain "
            f"why the largest such integer works and the next one does not.", str(len([n for n in range(1, b) if a * n + 3 < b])))


CLOSERS = ["Justify each step of your work before stating the final result.",
           "Explain the method you use and check your answer at the end.",
           "Write out the intermediate results so that every step can be verified."]


# ---------------------------------------------------------------- code catalogue (HumanEval / MBPP-like)
# (name, args, description with {k}, implementation taking k, example inputs)

TASKS = [
    ("count_greater", "numbers: list, k: int", "Return how many elements of numbers are greater than {k}.",
     lambda k: lambda numbers: sum(1 for x in numbers if x > k), [[1, 7, 9, 3], [10, 20], []]),
    ("sum_divisible", "numbers: list", "Return the sum of the elements of numbers that are divisible by {k}.",
     lambda k: lambda numbers: sum(x for x in numbers if x % k == 0), [[3, 6, 7, 12], [1, 2], [9, 10, 15]]),
    ("long_words", "words: list", "Return the words that have more than {k} characters, in their original order.",
     lambda k: lambda words: [w for w in words if len(w) > k], [["tree", "elephant", "encyclopedia"], ["a", "house"]]),
    ("digit_sum", "n: int", "Return the sum of the decimal digits of the non-negative integer n, multiplied by {k}.",
     lambda k: lambda n: k * sum(int(c) for c in str(n)), [123, 9, 4051]),
    ("rotate_left", "items: list", "Rotate the list items to the left by {k} positions and return the new list. "
     "An empty list stays empty.", lambda k: lambda items: items[k % len(items):] + items[:k % len(items)] if items else [],
     [[1, 2, 3, 4, 5], ["a", "b", "c"], []]),
    ("count_vowels", "text: str", "Return the number of vowels (a, e, i, o, u, either case) in text, plus {k} if the "
     "text ends with the letter y.", lambda k: lambda text: sum(c in "aeiouAEIOU" for c in text) + (k if text.endswith("y") else 0),
     ["hello", "sky", "AEIOU"]),
    ("running_max", "numbers: list", "Return a list where element i is the largest value among the first i + 1 "
     "elements of numbers, each increased by {k}.", lambda k: lambda numbers: [max(numbers[:i + 1]) + k for i in range(len(numbers))],
     [[1, 3, 2, 5], [4, 4, 1], []]),
    ("is_power_of", "n: int", "Return True if n is a positive integer power of {k} (including {k} to the power 0, "
     "which is 1), otherwise return False.", lambda k: lambda n: n >= 1 and (n == 1 or (n % k == 0 and is_pow(n, k))),
     [1, 8, 12, 27]),
    ("chunk_sums", "numbers: list", "Split numbers into consecutive chunks of {k} elements (the last chunk may be "
     "shorter) and return the list of chunk sums.", lambda k: lambda numbers: [sum(numbers[i:i + k]) for i in range(0, len(numbers), k)],
     [[1, 2, 3, 4, 5], [10], []]),
    ("caesar_shift", "text: str", "Shift every lowercase letter of text forward by {k} places in the alphabet, "
     "wrapping from z to a. Other characters are unchanged.",
     lambda k: lambda text: "".join(chr((ord(c) - 97 + k) % 26 + 97) if "a" <= c <= "z" else c for c in text),
     ["abc", "xyz!", "Hello"]),
    ("nth_smallest", "numbers: list", "Return the {k}-th smallest distinct value in numbers (1-based), or None if "
     "there are fewer than {k} distinct values.",
     lambda k: lambda numbers: sorted(set(numbers))[k - 1] if len(set(numbers)) >= k else None, [[5, 1, 4, 1, 3], [2, 2], [9, 8, 7]]),
    ("pair_count", "numbers: list", "Return the number of pairs of indices i < j such that numbers[i] + numbers[j] "
     "equals {k}.", lambda k: lambda numbers: sum(1 for i in range(len(numbers)) for j in range(i + 1, len(numbers)) if numbers[i] + numbers[j] == k),
     [[1, 2, 3, 4, 5, 6], [5, 5, 5], []]),
    ("compress_runs", "text: str", "Return text with every run of the same character longer than {k} shortened to "
     "exactly {k} characters.", lambda k: lambda text: compress(text, k), ["aaabbbbc", "hello", "zzzzzz"]),
    ("mean_above", "numbers: list", "Return the average of the elements of numbers that are at least {k}, rounded "
     "to two decimals, or 0.0 if there are none.",
     lambda k: lambda numbers: round(sum(x for x in numbers if x >= k) / len([x for x in numbers if x >= k]), 2) if [x for x in numbers if x >= k] else 0.0,
     [[1, 5, 10, 12], [0, 1], [7, 8, 9]]),
    ("every_kth", "items: list", "Return every {k}-th element of items, starting with the first one.",
     lambda k: lambda items: items[::k], [[1, 2, 3, 4, 5, 6, 7], ["a", "b"], []]),
    ("word_lengths", "sentence: str", "Split sentence on spaces and return a dictionary that maps each word longer "
     "than {k} characters to its length.", lambda k: lambda sentence: {w: len(w) for w in sentence.split() if len(w) > k},
     ["photosynthesis happens inside chloroplasts", "a bb ccc dddd"]),
    ("collatz_steps", "n: int", "Return how many steps the Collatz process takes to reach 1 from the positive "
     "integer n, where a step halves an even number and maps an odd number m to 3 * m + 1; stop early and return "
     "-1 after {k} steps.", lambda k: lambda n: collatz(n, k), [1, 6, 27]),
    ("balanced_brackets", "text: str", "Return True if the round brackets in text are balanced and never nested "
     "deeper than {k} levels, otherwise False.", lambda k: lambda text: balanced(text, k), ["(())", "((()))", "(()"]),
]


def is_pow(n, k):
    while n % k == 0:
        n //= k
    return n == 1


def compress(text, k):
    out, run = [], 0
    for i, c in enumerate(text):
        run = run + 1 if i and text[i - 1] == c else 1
        if run <= k:
            out.append(c)
    return "".join(out)


def collatz(n, k):
    steps = 0
    while n != 1:
        if steps == k:
            return -1
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


def balanced(text, k):
    depth = 0
    for c in text:
        depth += c == "("
        depth -= c == ")"
        if depth < 0 or depth > k:
            return False
    return depth == 0


def task_params(rng):
    """(task, k) pairs, distinct, in a seeded order"""
    pairs = [(t, k) for t in TASKS for k in range(2, 11)]
    rng.shuffle(pairs)
    return pairs


def human_eval(task, k, i):
    name, args, desc, impl, examples = task
    f = impl(k)
    fname = f"{name}_{k}"
    ex = "\n".join(f"    >>> {fname}({e!r})\n    {f(e)!r}" for e in examples[:2])
    prompt = f"def {fname}({args}):\n    \"\"\"{desc.format(k=k)}\n{ex}\n    \"\"\"\n"
    return {"task_id": f"DFlashBench/{i}", "prompt": prompt, "entry_point": fname}


def mbpp(task, k, i):
    name, args, desc, impl, examples = task
    f = impl(k)
    d = desc.format(k=k)
    text = f"Write a Python function called {name} that takes {args.split(':')[0]} as input. {d}"
    if words(text) < 20:
        text += " Include a short docstring and handle the empty input."
    tests = [f"assert {name}({e!r}) == {f(e)!r}" for e in examples]
    return {"task_id": 1000 + i, "text": text, "test_list": tests}


# ---------------------------------------------------------------- chat (MT-Bench-like)

TOPICS = ["a weekend trip to a mountain village", "learning to play the piano as an adult", "the history of the "
          "bicycle", "starting a community garden", "why sleep matters for students", "a small bakery that opens at "
          "dawn", "the first week at a new job", "how tides work", "choosing a first programming language",
          "a rainy afternoon in a big city", "the life of honeybees", "saving money on groceries",
          "volcanoes and how they form", "a friendly robot that learns to cook", "the invention of the printing press",
          "keeping a houseplant alive", "a chess tournament for beginners", "the water cycle"]

CHAT = [
    ("writing", "Write a short blog post of about 150 words about {t}. Use a friendly tone and give the post a "
     "catchy title.", "Now rewrite your post as a poem of exactly four lines, keeping its main idea and its title."),
    ("writing", "Compose a persuasive email to a friend inviting them to join you in {t}. Mention two concrete "
     "benefits and keep it under 120 words.", "Rewrite the email for a busy manager: make it half as long and more "
     "formal."),
    ("roleplay", "Pretend you are a tour guide who is an expert on {t}. Greet a group of visitors and explain in "
     "a few sentences what they are going to see.", "One visitor asks a skeptical question about what you just said. "
     "Answer it politely and with a concrete example."),
    ("reasoning", "Explain step by step how you would plan {t} if you had only one free day and a small budget. "
     "List the steps in order and justify each one.", "Suppose the budget is cut in half. Which of your steps "
     "change, and why?"),
    ("stem", "Describe {t} to a curious twelve-year-old. Use one everyday analogy and avoid technical jargon, but "
     "keep every statement correct.", "Now give the same explanation to a university student, adding two precise "
     "technical details."),
    ("humanities", "Discuss how {t} might be viewed differently by people in two different centuries. Give one "
     "reason for each view in a short paragraph.", "Summarize your answer in a single sentence a newspaper could "
     "use as a headline."),
    ("extraction", "Read this note and list every date, person and place it mentions as a JSON object: 'On 3 May, "
     "Rosa and Hiro met in Lisbon to talk about {t}; they meet again on 9 June in Porto.'",
     "Add a field that says how many days pass between the two meetings, and show the calculation."),
    ("math", "A group of 12 people shares the cost of {t}, which costs 348 dollars in total. How much does each "
     "person pay? Explain your reasoning clearly.", "Three more people join and the cost rises by 42 dollars. "
     "What does each person pay now?"),
    ("coding", "Write a Python function that keeps a to-do list for {t}: it should add items, mark them done and "
     "print the items that are still open. Explain your design briefly.", "Extend the function so that items can "
     "have a priority, and show the open items sorted by priority."),
]


def main():
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "datasets")
    os.makedirs(out, exist_ok=True)
    rng = random.Random(SEED)
    sets = {}

    seen, rows = set(), []
    while len(rows) < N:
        q, ans = math_problem(rng)
        if q not in seen:
            seen.add(q)
            rows.append({"question": q, "answer": f"#### {ans}"})
    sets["math"] = rows

    seen, rows = set(), []
    while len(rows) < N:
        subject, level, p, ans = hard_problem(rng)
        if words(p) < 20:
            p += " " + rng.choice(CLOSERS)
        if p not in seen:
            seen.add(p)
            rows.append({"problem": p, "answer": ans, "subject": subject, "level": level,
                         "unique_id": f"dflash-bench/{subject.lower().replace(' ', '_')}/{len(rows)}.json"})
    sets["math-hard"] = rows

    pairs = task_params(rng)
    sets["code"] = [human_eval(t, k, i) for i, (t, k) in enumerate(pairs[:N])]
    sets["code-basic"] = [mbpp(t, k, i) for i, (t, k) in enumerate(pairs[N:2 * N])]

    combos = [(c, t) for c in CHAT for t in TOPICS]
    rng.shuffle(combos)
    sets["chat"] = [{"question_id": 1 + i, "category": c[0], "turns": [c[1].format(t=t), c[2]]}
                    for i, (c, t) in enumerate(combos[:N])]

    field = {"math": "question", "math-hard": "problem", "code": "prompt", "code-basic": "text", "chat": "turns"}
    for name, rows in sets.items():
        assert len(rows) >= 64, name
        for r in rows:
            texts = r[field[name]] if name == "chat" else [r[field[name]]]
            for t in texts:
                assert 8 <= words(t) <= 120 and (name == "chat" or words(t) >= 20), (name, words(t), t)
        with open(os.path.join(out, name + ".jsonl"), "w", encoding="utf-8") as f:
            for r in rows:
                f.write(json.dumps(r, ensure_ascii=False) + "\n")
        print(f"{name}.jsonl: {len(rows)} prompts, {min(words(str(r[field[name]])) for r in rows)}-"
              f"{max(words(str(r[field[name]])) for r in rows)} words")


if __name__ == "__main__":
    main()
