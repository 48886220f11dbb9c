"""A card-shaped benchmark: the four official files with the dataset card's counts, built from real statute text.

`build_card_benchmark(statutes_path, out_dir, seed=0)` writes `train_squad.jsonl`, `val_squad.jsonl`,
`test_squad.jsonl`, `merged_ip_qa.jsonl` (the official SQuAD-style schema) and a `README.md` provenance note.
It is a stand-in for the official release in the dress rehearsal: shaped like it, not a copy of it.

What it matches (the card's figures, exactly or to the card's rounding):

- 4,462 QA pairs over 1,116 distinct contexts; splits 3,710 / 408 / 344;
- per Act (full, test): Designs (173, 24), Patents (1143, 69), Semiconductor (585, 47), Trade Marks (1106, 88),
  Geographical Indications (551, 51), Copyright (349, 25), Plant Varieties (555, 40);
- mean context 171.3 words, mean question 11.9 words, mean answer 35.6 words and median answer 33 words;
- 1,157 questions begin "what does", 960 "under section", 875 "what is"; 4,118 unique normalised questions;
- a section-level split: every section (and so every context) belongs to one split only (train-test Jaccard 0).

How, given that the statutes file holds only 59 sections (~10.5k words) for 1,116 contexts of ~171 words:

- the sections are cleaned with the pipeline's own cleaner (`indicipr.build.cleaning.clean_section`);
- per Act, the sections are divided into a train, a validation and a test pool (whole sections);
- each pool is REUSED: pass 0 keeps the real section numbers, every later pass renumbers its sections with new
  numbers above the Act's highest real one (so "Section 157", "Section 158", ... are re-used real sections);
- a context is the renumbered section heading (`157. Heading.—`) followed by a window of the pool's text that
  starts at a clause and runs for a chosen number of words (it may continue into the next section of the pool);
- one extra context per Act is its Section 1 (short title), composed from the Act's title, so that the Act's name
  can be read from the data ("This Act may be called the Patents Act, 1970");
- answers are exact word spans of their context (often starting at a clause, single- and multi-clause, early and
  late in the context); questions are templated from the section number and context words before the answer.

Ids use the official form `<prefix>_<6 digits>`: `cop` for Copyright (the only prefix the card shows) and, for
the others, prefixes of which several are NOT in indicipr's Act registry (`PREFIXES`), so that a pipeline run on
this data must infer the Acts from the records (Section 1 short titles, per-prefix counts against the card).

Deterministic: the same inputs and seed give the same files byte for byte.
"""

from __future__ import annotations

import json
import math
import os
import random
import re
import tempfile
from pathlib import Path

# -- the card (the spec) -----------------------------------------------------------------------------------
from indicipr.data.core import ACTS, CARD, OFFICIAL_FILES  # noqa: E402  (the card's numbers live once, in core.CARD)

CARD_PER_ACT = CARD["per_act"]  # key: (full dataset, test set), the card's "Per-Act Distribution" table, in its order
CARD_SHORT = {k: ACTS[k].short for k in CARD_PER_ACT}
CARD_SPLITS = CARD["splits"]
CARD_TOTAL = CARD["construction"]["final_qa_pairs"]
CARD_CONTEXTS = CARD["construction"]["retained_contexts"]
CARD_MEAN_CONTEXT_WORDS = CARD["average_words"]["context"]
CARD_MEAN_QUESTION_WORDS = CARD["average_words"]["question"]
CARD_MEAN_ANSWER_WORDS = CARD["average_words"]["answer"]
CARD_MEDIAN_ANSWER_WORDS = CARD["answer_structure"]["median_answer_words"]
CARD_OPENINGS = CARD["question_patterns"]["openings"]
CARD_UNIQUE_QUESTIONS = CARD["question_patterns"]["unique"]
ACT_TITLES = {k: a.title for k, a in ACTS.items()}
ACT_ORDER = ["patents", "trademarks", "copyright", "designs", "gi", "semiconductor", "plant_varieties"]
# `cop` is the card's; trm, gid, scl, pvr are not in indicipr.data.core.ACTS (prefixes or aliases) on purpose
PREFIXES = {
    "patents": "pat",
    "trademarks": "trm",
    "copyright": "cop",
    "designs": "des",
    "gi": "gid",
    "semiconductor": "scl",
    "plant_varieties": "pvr",
}
SPLIT_ORDER = ("train", "validation", "test")


def short_title_answer(act: str) -> str:
    "The card's example answer of Section 1: `This Act may be called the ... Act, YEAR.`"
    return f"This Act may be called the {ACT_TITLES[act][len('The ') :]}."


def short_title_context(act: str) -> str:
    "Section 1 of an Act (short title, extent, commencement), composed from its title."
    name = ACT_TITLES[act][len("The ") :]
    return (
        f"(1) This Act may be called the {name}. (2) It extends to the whole of India. "
        "(3) It shall come into force on such date as the Central Government may, by notification in the "
        "Official Gazette, appoint."
    )


# -- small helpers -------------------------------------------------------------------------------------------
def _largest_remainder(total: int, weights: dict) -> dict:
    "Integers proportional to `weights` summing to `total` (ties by key order)."
    s = sum(weights.values())
    quotas = {k: total * w / s for k, w in weights.items()}
    out = {k: int(math.floor(q)) for k, q in quotas.items()}
    for k in sorted(quotas, key=lambda k: (-(quotas[k] - out[k]), list(weights).index(k)))[: total - sum(out.values())]:
        out[k] += 1
    return out


def split_counts() -> dict:
    "QA pairs per (act, split): the card's full and test counts; validation shared in proportion to what is left."
    rest = {a: CARD_PER_ACT[a][0] - CARD_PER_ACT[a][1] for a in ACT_ORDER}
    val = _largest_remainder(CARD_SPLITS["validation"], rest)
    return {a: {"train": rest[a] - val[a], "validation": val[a], "test": CARD_PER_ACT[a][1]} for a in ACT_ORDER}


def context_counts(counts: dict) -> dict:
    "Contexts per (act, split), ~4 QA pairs each, summing to the card's 1,116 (one of each Act's is Section 1)."
    n = {(a, s): counts[a][s] for a in ACT_ORDER for s in SPLIT_ORDER}
    c = {k: max(1, round(v / 4)) for k, v in n.items()}
    keys = list(n)
    while sum(c.values()) != CARD_CONTEXTS:
        more = sum(c.values()) < CARD_CONTEXTS
        # move the (act, split) whose pairs per context is furthest from 4 in the needed direction
        ok = [k for k in keys if (n[k] / (c[k] + 1) >= 3 if more else n[k] / (c[k] - 1) <= 5 and c[k] > 1)]
        k = max(ok, key=lambda k: (n[k] / c[k] if more else -n[k] / c[k], -keys.index(k)))
        c[k] += 1 if more else -1
    return c


def _pairs_per_context(n: int, c: int, rng: random.Random) -> list[int]:
    "`c` numbers in 3..5 (mostly 4) summing to `n`."
    out = [n // c] * c
    for i in range(n - sum(out)):
        out[i] += 1
    for _ in range(c // 3):  # some variety: move one pair from one context to another
        i, j = rng.randrange(c), rng.randrange(c)
        if i != j and out[i] > 3 and out[j] < 5:
            out[i] -= 1
            out[j] += 1
    rng.shuffle(out)
    assert sum(out) == n and all(3 <= k <= 5 for k in out), (n, c, out)
    return out


def _fix_sum(values: list[int], target: int, rng: random.Random, lo: int, hi: int, frozen=(), keep=None) -> list[int]:
    "Add/subtract 1 from random unfrozen entries (within [lo, hi], never crossing `keep`) until they sum to `target`."
    values, frozen = list(values), set(frozen)
    idx = [i for i in range(len(values)) if i not in frozen]
    guard = 0
    while sum(values) != target:
        step = 1 if sum(values) < target else -1
        i = idx[rng.randrange(len(idx))]
        v = values[i] + step
        side_ok = keep is None or (values[i] > keep and v > keep) or (values[i] < keep and v < keep)
        if lo <= v <= hi and side_ok:
            values[i] = v
        guard += 1
        if guard > 10_000_000:
            raise RuntimeError("cannot reach the target sum")
    return values


# -- statutes -> pools of words ------------------------------------------------------------------------------
def _load_sections(statutes_path) -> dict[str, list[dict]]:
    "Cleaned sections per Act (the pipeline's cleaner), in file order."
    from indicipr.build.cleaning import clean_section
    from indicipr.build.sections import read_sections_jsonl

    out = {a: [] for a in ACT_ORDER}
    for rec in read_sections_jsonl(statutes_path):
        sec = clean_section(rec)
        heading = re.sub(r"^Section \S+:?\s*", "", sec["title"])
        words = " ".join(sec["units"]).split()
        if rec["act"] in out and words:
            out[rec["act"]].append({"section": rec["section"], "heading": heading, "words": words})
    missing = [a for a in ACT_ORDER if not out[a]]
    if missing:
        raise ValueError(f"{statutes_path}: no sections for {', '.join(missing)}")
    return out


def _pools(sections: list[dict]) -> dict[str, list[dict]]:
    "Whole sections per split: test from the end, then validation, each with >= 250 words when possible; the rest train."
    secs, pools = list(sections), {"test": [], "validation": []}
    for split in ("test", "validation"):
        while secs and len(secs) > 1 and sum(len(s["words"]) for s in pools[split]) < 250:
            pools[split].insert(0, secs.pop())
    pools["train"] = secs
    return pools


_CLAUSE_TOKEN = re.compile(r"^\((?:[a-z]{1,3}|[ivx]{1,5}|\d{1,3}[A-Z]?)\)$")


def _clause_starts(words: list[str]) -> list[int]:
    "Word indexes where a clause starts (`(a)`, `(2)`, or after `.`/`;`/`:`/`—`)."
    out = [0]
    for i in range(1, len(words)):
        if re.fullmatch(r"\d+[A-Z]*\.", words[i - 1]):
            continue  # not inside a section heading
        if _CLAUSE_TOKEN.match(words[i]) or re.search(r"[.;:—-]$", words[i - 1]):
            out.append(i)
    return out


def _section_number(real: str, p: int, counter: dict, key) -> str:
    if p == 0:
        return real
    if key not in counter["map"]:
        counter["next"] += 1
        counter["map"][key] = str(counter["next"])
    return counter["map"][key]


def _heading_words(num: str, heading: str) -> list[str]:
    h = heading.strip().rstrip(".:;,-—– ")
    return f"{num}. {h}.—".split() if h else [f"{num}.—"]


def _pool_contexts(act, split, pool, n_contexts, lengths, counter, rng) -> list[dict]:
    "`n_contexts` contexts of the given word lengths from one pool (see the module docstring)."
    starts = [(si, w) for si, s in enumerate(pool) for w in _clause_starts(s["words"])]
    per_pass = len(starts)
    passes = max(1, math.ceil(n_contexts / per_pass))
    # spread the contexts over `passes` passes: evenly spaced picks of (pass, start)
    total = passes * per_pass
    picks = sorted({int(i * total / n_contexts) for i in range(n_contexts)})
    while len(picks) < n_contexts:  # cannot happen with evenly spaced picks, kept for safety
        picks = sorted(set(picks) | {rng.randrange(total)})
    out = []
    for k, g in enumerate(picks):
        p, (si, w) = divmod(g, per_pass)[0], starts[g % per_pass]
        sec = pool[si]
        num = _section_number(sec["section"], p, counter, (split, p, si))
        words = _heading_words(num, sec["heading"])
        # the stream: rest of this section, then the following sections (next pass after the pool's end)
        pp, sj, pos = p, si, w
        target = lengths[k]
        while len(words) < target:
            s2 = pool[sj]
            if pos == 0 and (pp, sj) != (p, si):
                words += _heading_words(_section_number(s2["section"], pp, counter, (split, pp, sj)), s2["heading"])
            take = s2["words"][pos : pos + target - len(words)]
            words += take
            pos += len(take)
            if pos >= len(s2["words"]):
                pos, sj = 0, sj + 1
                if sj == len(pool):
                    sj, pp = 0, pp + 1
        words = words[:target]
        out.append(
            {"act": act, "split": split, "section": num, "heading": sec["heading"], "order": (p, si, w), "words": words}
        )
    return out


def _snap_to_clause_end(target: int, ends: list[int], slack: int = 25) -> int:
    "A length near `target` that ends a clause (a word ending in . ; :), if one is within `slack` words."
    near = [e for e in ends if abs(e - target) <= slack]
    return min(near, key=lambda e: (abs(e - target), e)) if near else target


# -- questions -----------------------------------------------------------------------------------------------
TEMPLATES = {
    "what does": [
        "What does Section {n} provide regarding {t}?",
        "What does sub-section ({k}) of Section {n} lay down about {t}?",
        "What does the {act} Act require in respect of {t}?",
    ],
    "under section": [
        "Under Section {n}, what applies to {t}?",
        "Under Section {n} of the {act} Act, what is provided for {t}?",
        "Under section {n}, what follows from {t}?",
    ],
    "what is": [
        "What is required under Section {n} concerning {t}?",
        "What is the effect of {t} under Section {n}?",
        "What is provided in the {act} Act on {t}?",
        "What is the scope of {t}?",
    ],
    "other": [
        "Which provision of Section {n} governs {t}?",
        "Who may act in relation to {t} under Section {n}?",
        "When does Section {n} apply to {t}?",
        "How does Section {n} treat {t}?",
        "Within what limits does Section {n} deal with {t}?",
    ],
}


def _plain(w: str) -> str:
    return re.sub(r"[^\w'-]+", "", w).lower().strip("'-")


def _topic_words(words: list[str], a_start: int, a_end: int, head: int, k: int, shift: int = 0) -> list[str] | None:
    "`k` plain words of the context in reading order: those just before the answer (moved back by `shift`), else just after it."
    before = [w for w in (_plain(x) for x in words[head:a_start]) if w and not w.isdigit()]
    after = [w for w in (_plain(x) for x in words[a_end:]) if w and not w.isdigit()]
    if len(before) >= k + shift:
        return before[len(before) - k - shift : len(before) - shift]
    if len(after) >= k + shift:
        return after[shift : shift + k]
    return None


def _question(cat, template, t, num, act, k) -> str:
    return template.format(n=num, t=" ".join(t), act=CARD_SHORT[act], k=k)


def _template_base(template: str, act: str) -> int:
    return len(_question("", template, ["x"], "1", act, 1).split()) - 1


def normalize_question(q: str) -> str:
    "The card's normalisation: lower case, runs of non-word characters -> one space, trimmed."
    return re.sub(r"\W+", " ", q.lower()).strip()


# -- the build -----------------------------------------------------------------------------------------------
def build_records(statutes_path, seed: int = 0) -> dict[str, list[dict]]:
    "The records of the four official files (`train`, `validation`, `test`, `merged`), in id order."
    from indicipr.build.cleaning import section_title

    rng = random.Random(seed)
    sections = _load_sections(statutes_path)
    counts = split_counts()
    ctx_counts = context_counts(counts)

    # 1. context lengths: one list for all contexts, exact total for the card's mean (Section 1 contexts fixed)
    plan = []  # (act, split) per non-Section-1 context, in a fixed order
    for a in ACT_ORDER:
        for s in SPLIT_ORDER:
            plan += [(a, s)] * (ctx_counts[(a, s)] - (1 if s == "train" else 0))
    fixed = sum(len(short_title_context(a).split()) for a in ACT_ORDER)
    target_total = round(CARD_MEAN_CONTEXT_WORDS * CARD_CONTEXTS)
    raw = [min(330, max(60, round(rng.gauss(CARD_MEAN_CONTEXT_WORDS, 60)))) for _ in plan]
    lengths = _fix_sum(raw, target_total - fixed, rng, 60, 330)

    # 2. build the contexts per pool, snapping ends to clause ends, then fix the total again at word level
    contexts, cursor = [], 0
    for a in ACT_ORDER:
        pools = _pools(sections[a])
        counter = {"next": max(int(re.match(r"\d+", s["section"]).group()) for s in sections[a]), "map": {}}
        for s in SPLIT_ORDER:
            n = ctx_counts[(a, s)] - (1 if s == "train" else 0)
            want = lengths[cursor : cursor + n]
            cursor += n
            built = _pool_contexts(a, s, pools[s], n, [w + 30 for w in want], counter, rng)
            for ctx, w in zip(built, want):
                ends = [i + 1 for i, x in enumerate(ctx["words"]) if re.search(r"[.;:]$", x) and i + 1 >= 60]
                ctx["n"] = _snap_to_clause_end(w, ends)
            contexts += built
    gap = target_total - fixed - sum(c["n"] for c in contexts)
    order = list(range(len(contexts)))
    rng.shuffle(order)
    for i in order:
        if gap == 0:
            break
        c = contexts[i]
        step = max(-15, min(15, gap))
        new = min(max(60, c["n"] + step), len(c["words"]))
        gap -= new - c["n"]
        c["n"] = new
    if gap:
        raise RuntimeError(f"could not reach the card's mean context length (off by {gap} words)")
    for c in contexts:
        c["words"] = c["words"][: c["n"]]
    for a in ACT_ORDER:
        contexts.append(
            {
                "act": a,
                "split": "train",
                "section": "1",
                "heading": "Short title, extent and commencement",
                "order": (-1, -1, -1),
                "words": short_title_context(a).split(),
                "n": None,
            }
        )
    for c in contexts:
        c["text"] = " ".join(c["words"])
    texts = [c["text"] for c in contexts]
    if len(set(texts)) != len(texts):
        raise RuntimeError("two contexts came out identical")

    # 3. QA pairs per context
    slots = []  # (context index, slot number)
    for a in ACT_ORDER:
        for s in SPLIT_ORDER:
            idx = [i for i, c in enumerate(contexts) if c["act"] == a and c["split"] == s]
            for i, k in zip(idx, _pairs_per_context(counts[a][s], len(idx), rng)):
                slots += [(i, j) for j in range(k)]
    assert len(slots) == CARD_TOTAL
    # the card's example pair, for each Act's Section 1
    example = {i for i, c in enumerate(contexts) if c["section"] == "1"}
    fixed_slots = [n for n, (i, j) in enumerate(slots) if i in example and j == 0]

    # 4. answer lengths: median 33, mean 35.6 (the fixed example answers have their own length)
    def draw():
        return min(140, max(3, round(math.exp(rng.gauss(math.log(CARD_MEDIAN_ANSWER_WORDS), 0.42)))))

    example_len = {n: len(short_title_answer(contexts[slots[n][0]]["act"]).split()) for n in fixed_slots}
    alen = [example_len[n] if n in example_len else draw() for n in range(CARD_TOTAL)]
    # exact median: the two middle values must be 33 -> move values across the median as needed
    free = [n for n in range(CARD_TOTAL) if n not in set(fixed_slots)]
    below = sum(v < 33 for v in alen)
    above = sum(v > 33 for v in alen)
    half = CARD_TOTAL // 2  # 2231: need < 33 at most 2230 and > 33 at most 2230
    for n in free:
        if below <= half - 1 and above <= half - 1:
            break
        if below > half - 1 and alen[n] < 33:
            alen[n] = 33
            below -= 1
        elif above > half - 1 and alen[n] > 33:
            alen[n] = 33
            above -= 1
    target_answer = round(CARD_MEAN_ANSWER_WORDS * CARD_TOTAL)
    alen = _fix_sum(alen, target_answer, rng, 4, 140, frozen=fixed_slots, keep=33)

    # match lengths to contexts: an answer has at most 80% of its context's words (short contexts get short answers)
    cap = [int(0.8 * len(contexts[i]["words"])) for i, _ in slots]
    order = sorted(range(CARD_TOTAL), key=lambda n: (cap[n], n))
    free_sorted = sorted((alen[n] for n in free), reverse=False)
    # assign the smallest lengths to the smallest caps, then shuffle within windows to keep variety
    free_order = [n for n in order if n not in set(fixed_slots)]
    assigned = dict(zip(free_order, free_sorted))
    win = 40
    for w0 in range(0, len(free_order), win):
        group = free_order[w0 : w0 + win]
        vals = [assigned[n] for n in group]
        rng.shuffle(vals)
        for n, v in zip(group, vals):
            assigned[n] = v
    for n in free_order:
        if assigned[n] > cap[n]:  # swap with a larger-cap slot holding a shorter answer
            for m in reversed(free_order):
                if assigned[m] <= cap[n] and assigned[n] <= cap[m]:
                    assigned[n], assigned[m] = assigned[m], assigned[n]
                    break
            else:
                raise RuntimeError(f"no room for a {assigned[n]}-word answer")
    for n in fixed_slots:
        assigned[n] = example_len[n]

    # 5. answer spans
    spans = {}
    for n, (i, j) in enumerate(slots):
        words, L = contexts[i]["words"], assigned[n]
        if n in fixed_slots:
            spans[n] = (1, 1 + L)
            continue
        head = (
            len(_heading_words(contexts[i]["section"], contexts[i]["heading"])) if contexts[i]["section"] != "1" else 0
        )
        lo, hi = (head if len(words) - head >= L else 0), len(words) - L
        cands = [s for s in _clause_starts(words) if lo <= s <= hi] or list(range(lo, hi + 1))
        taken = {spans[m][0] for m in range(n - j, n)}
        choice = [s for s in cands if s not in taken] or cands
        s0 = choice[rng.randrange(len(choice))]
        spans[n] = (s0, s0 + L)

    # 6. questions: categories with the card's counts, lengths with the card's mean
    cats = (
        ["what does"] * CARD_OPENINGS["what does"]
        + ["under section"] * CARD_OPENINGS["under section"]
        + ["what is"] * CARD_OPENINGS["what is"]
    )
    cats += ["other"] * (CARD_TOTAL - len(cats))
    cats_free = cats[len(fixed_slots) :]  # the fixed examples are "what does" questions
    rng.shuffle(cats_free)
    qcat = {}
    it = iter(cats_free)
    for n in range(CARD_TOTAL):
        qcat[n] = "what does" if n in fixed_slots else next(it)
    qlen = [
        8 if n in fixed_slots else min(22, max(7, round(rng.gauss(CARD_MEAN_QUESTION_WORDS, 2.6))))
        for n in range(CARD_TOTAL)
    ]
    qlen = _fix_sum(qlen, round(CARD_MEAN_QUESTION_WORDS * CARD_TOTAL), rng, 7, 22, frozen=fixed_slots)
    example_q = "What does sub-section (1) of Section 1 provide?"
    questions, seen = {}, {normalize_question(example_q)}
    for n, (i, j) in enumerate(slots):
        c = contexts[i]
        if n in fixed_slots:
            q = example_q
        else:
            head = len(_heading_words(c["section"], c["heading"])) if c["section"] != "1" else 0
            options = [t for t in TEMPLATES[qcat[n]] if qlen[n] - _template_base(t, c["act"]) >= 1]
            q = None
            for shift in range(0, 60):
                t = options[(n + shift) % len(options)]
                k = qlen[n] - _template_base(t, c["act"])
                words_t = _topic_words(c["words"], spans[n][0], spans[n][1], head, k, shift // len(options))
                if words_t is None:
                    continue
                cand = _question(qcat[n], t, words_t, c["section"], c["act"], 1 + j)
                if normalize_question(cand) not in seen:
                    q = cand
                    break
            if q is None:
                raise RuntimeError(f"no unique question for context {i} slot {j}")
        if len(q.split()) != qlen[n]:
            raise RuntimeError(f"question of {len(q.split())} words, wanted {qlen[n]}: {q!r}")
        seen.add(normalize_question(q))
        questions[n] = q
    # exactly CARD_TOTAL - CARD_UNIQUE_QUESTIONS repeats: the 7 Section 1 examples repeat one question (6 repeats),
    # the rest copy another question of the same Act, opening and length
    repeats = CARD_TOTAL - CARD_UNIQUE_QUESTIONS - (len(fixed_slots) - 1)
    groups = {}
    for n in range(CARD_TOTAL):
        if n not in fixed_slots:
            groups.setdefault((contexts[slots[n][0]]["act"], qcat[n], len(questions[n].split())), []).append(n)
    pairs = []
    for key in sorted(groups, key=lambda k: (-len(groups[k]), k)):
        g = groups[key][:]
        rng.shuffle(g)
        while len(g) >= 2 and len(pairs) < repeats:
            pairs.append((g.pop(), g.pop()))
        if len(pairs) >= repeats:
            break
    for target, source in pairs:
        questions[target] = questions[source]

    # 7. records, ids per Act in statute order (Section 1 first)
    def sec_key(c):
        m = re.match(r"(\d+)([A-Z]*)", c["section"])
        return (int(m.group(1)), m.group(2), c["order"])

    by_ctx = {}
    for n, (i, _) in enumerate(slots):
        by_ctx.setdefault(i, []).append(n)
    merged, split_of = [], {}
    for a in ACT_ORDER:
        k = 0
        for i in sorted((i for i, c in enumerate(contexts) if c["act"] == a), key=lambda i: sec_key(contexts[i])):
            c = contexts[i]
            title = section_title(c["section"], c["heading"])
            for n in by_ctx[i]:
                k += 1
                s0, s1 = spans[n]
                start = len(" ".join(c["words"][:s0])) + (1 if s0 else 0)
                answer = " ".join(c["words"][s0:s1])
                stripped = answer.rstrip(",;:")
                if stripped.split() and len(stripped.split()) == len(answer.split()):
                    answer = stripped
                rec = {
                    "id": f"{PREFIXES[a]}_{k:06d}",
                    "title": title,
                    "context": c["text"],
                    "question": questions[n],
                    "answers": {"text": [answer], "answer_start": [start]},
                }
                assert c["text"][start : start + len(answer)] == answer, rec["id"]
                merged.append(rec)
                split_of[rec["id"]] = c["split"]
    out = {s: [r for r in merged if split_of[r["id"]] == s] for s in SPLIT_ORDER}
    out["merged"] = merged
    return out


def _write_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
        f.write(text)
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


PROVENANCE = """# Card-shaped stand-in benchmark (NOT the official IndicIPR-QA release)

Built by `tests/standins/card_benchmark.py` (`build_card_benchmark`, seed {seed}) for the dress rehearsal of
`indicipr reproduce --profile paper`. It has the shape of the official files (the dataset card's counts,
per-Act table, splits, mean lengths and question openings) but not their content:

- contexts are the {n_sections} statute sections of `{statutes}` (cleaned by `indicipr.build.cleaning.clean_section`),
  REUSED with varied numbering: pass 0 keeps the real section numbers, later passes give the same sections
  new numbers above each Act's highest real one; a context is a renumbered heading plus a window of the text;
- each Act's Section 1 context (short title) is composed from the Act's title;
- questions are templates filled with the section number and context words; answers are exact word spans;
- ids: {prefixes}.

Counts: {counts}. Do not report any score computed on these files.
"""


def build_card_benchmark(statutes_path, out_dir, seed: int = 0) -> dict:
    "Write the four official files and a provenance README to `out_dir`; return the counts per file."
    statutes_path, out_dir = Path(statutes_path), Path(out_dir)
    records = build_records(statutes_path, seed)
    for split, name in OFFICIAL_FILES.items():
        _write_atomic(out_dir / name, "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records[split]))
    counts = {s: len(r) for s, r in records.items()}
    n_sections = sum(1 for line in statutes_path.read_text(encoding="utf-8").splitlines() if line.strip())
    _write_atomic(
        out_dir / "README.md",
        PROVENANCE.format(
            seed=seed,
            statutes=statutes_path.name,
            n_sections=n_sections,
            prefixes=", ".join(f"`{p}` {CARD_SHORT[a]}" for a, p in PREFIXES.items()),
            counts=", ".join(f"{s} {n:,}" for s, n in counts.items()),
        ),
    )
    return counts


if __name__ == "__main__":
    import sys

    root = Path(__file__).resolve().parents[2]
    dest = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp(prefix="card_benchmark_"))
    print(build_card_benchmark(root / "data" / "sample" / "statutes" / "sections.jsonl", dest), "->", dest)


# -- the files as a release may really look -----------------------------------------------------------------
ACT_OF_PREFIX = {p: a for a, p in PREFIXES.items()}


def dress_as_released(out_dir) -> dict:
    """Give the four files of `out_dir` the shapes a real release may have, keeping every record:
    the merged file carries columns the split files lack (the Act by the card's name, a question type, the section, the
    split), the split files start with a UTF-8 byte-order mark (the test file also has CRLF line ends), and one training
    record's `answer_start` is off by one. Returns that record: `{"file", "line", "id", "given", "right"}`."""
    out_dir = Path(out_dir)

    def read(name):
        return [
            json.loads(line) for line in (out_dir / name).read_text(encoding="utf-8-sig").splitlines() if line.strip()
        ]

    splits = {s: read(OFFICIAL_FILES[s]) for s in OFFICIAL_FILES}
    split_of = {r["id"]: s for s in SPLIT_ORDER for r in splits[s]}
    merged = [
        {
            **r,
            "act": CARD_SHORT[ACT_OF_PREFIX[r["id"].rsplit("_", 1)[0]]],
            "question_type": "other",
            "section": r["title"].split(":")[0].removeprefix("Section ").strip(),
            "split": split_of[r["id"]],
        }
        for r in splits["merged"]
    ]
    line = len(splits["train"]) // 2
    rec = splits["train"][line]
    right = rec["answers"]["answer_start"][0]
    splits["train"][line] = {**rec, "answers": {**rec["answers"], "answer_start": [right + 1]}}

    def dumps(recs, eol="\n"):
        return "".join(json.dumps(r, ensure_ascii=False) + eol for r in recs)

    _write_atomic(out_dir / OFFICIAL_FILES["merged"], dumps(merged))
    for s in SPLIT_ORDER:
        _write_atomic(out_dir / OFFICIAL_FILES[s], "\ufeff" + dumps(splits[s], "\r\n" if s == "test" else "\n"))
    return {"file": OFFICIAL_FILES["train"], "line": line + 1, "id": rec["id"], "given": right + 1, "right": right}
