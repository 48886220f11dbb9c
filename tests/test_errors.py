"""Error taxonomy, answer structure and dataset statistics on the real-statute fixture."""
import json
from pathlib import Path

import pandas as pd
import pytest

from indicipr import errors as E
from indicipr import metrics as M
from indicipr import stats as ST

FIXTURE = Path(__file__).parent / "fixtures" / "qa_small"


def records(name):
    return [json.loads(line) for line in (FIXTURE / name).read_text(encoding="utf-8").splitlines()]


def gold_parts(rec):
    return rec["answers"]["text"], rec["context"], rec["answers"]["answer_start"]


def test_taxonomy_on_real_answers():
    """Constructed predictions of each kind, on every fixture question where the construction is unambiguous."""
    checked = 0
    for rec in records("merged_ip_qa.jsonl"):
        golds, context, starts = gold_parts(rec)
        gold, start = golds[0], starts[0]
        words = gold.split()
        rest = context[start + len(gold):]
        if len(words) < 4 or len(rest.split()) < 4:
            continue
        assert E.classify_error(gold, golds, context, starts) is None
        assert E.classify_error(gold.upper() + ".", golds, context, starts) is None
        run_on = context[start:start + len(gold) + len(" ".join(rest.split()[:3])) + 1]
        if M.exact_match(run_on, golds) == 0:
            assert E.classify_error(run_on, golds, context, starts) == "span_boundary", rec["id"]
        truncated = " ".join(words[: len(words) // 2])
        if M.exact_match(truncated, golds) == 0 and context.find(truncated, start) == start:
            assert E.classify_error(truncated, golds, context, starts) == "span_boundary", rec["id"]
        assert E.classify_error("zzzz qqqq", golds, context, starts) == "completely_wrong"
        checked += 1
    assert checked > 50


def test_taxonomy_table_counts_every_non_exact_prediction():
    gold = records("test_squad.jsonl")
    preds = {}
    for i, r in enumerate(gold):
        a, c = r["answers"]["text"][0], r["context"]
        preds[r["id"]] = [a, c[:40], a + " " + c[-30:], "zzzz"][i % 4]
    frame, summary = M.score_predictions(gold, preds)
    table = E.error_taxonomy_table(frame)
    n_non_exact = int((frame["em"] < 100).sum())
    assert table["Count"].sum() == n_non_exact > 0
    assert table["Percentage"].sum() == pytest.approx(100.0)
    assert table.set_index("Error type").loc["Completely wrong", "Count"] >= len(gold) // 4


def test_clause_markers_on_real_answers():
    by_id = {r["id"]: r["answers"]["text"][0] for r in records("merged_ip_qa.jsonl")}
    multi = [a for a in by_id.values() if E.is_multi_clause(a)]
    assert any("(b) cinematograph films" in a for a in multi)
    for a in by_id.values():
        if "sub-section (" in a and ";" not in a and "provided" not in a.lower():
            assert not E.is_multi_clause(a), a


def test_answer_structure_groups_partition_the_questions():
    gold = records("test_squad.jsonl")
    frame, _ = M.score_predictions(gold, {r["id"]: r["answers"]["text"][0] for r in gold[::2]})
    table = E.answer_structure_table(frame)
    for analysis, part in table.groupby("Analysis"):
        assert part["Questions"].sum() == len(gold), analysis
    words = frame["golds"].map(lambda g: len(g[0].split()))
    short = table[table["Group"].str.startswith("Short")]
    assert short["Questions"].iloc[0] == int((words <= words.median()).sum())
    # group means are consistent with the overall mean
    length = table[table["Analysis"] == "Answer length"]
    assert (length["F1"] * length["Questions"]).sum() / len(gold) == pytest.approx(frame["f1"].mean())


def test_stats_on_fixture_match_direct_counts():
    splits = {"train": records("train_squad.jsonl"), "validation": records("val_squad.jsonl"),
              "test": records("test_squad.jsonl"), "merged": records("merged_ip_qa.jsonl")}
    glance = dict(ST.glance_table(splits).values)
    assert glance["Total QA pairs"] == 271 and glance["Test samples"] == len(splits["test"])
    contexts = {r["context"] for r in splits["merged"]}
    assert glance["Retained statutory contexts"] == len(contexts)
    assert glance["Average context length (words)"] == round(sum(len(c.split()) for c in contexts) / len(contexts), 1)
    dist = ST.per_act_distribution(splits).set_index("Act")
    assert dist.loc["Total", "Full dataset"] == 271 and dist.drop("Total")["Test set"].sum() == len(splits["test"])
    unseen = ST.unseen_vocabulary_table(splits["train"], splits["test"]).set_index("Field")
    train_answer_vocab = ST.vocabulary(r["answers"]["text"][0] for r in splits["train"])
    test_answer_vocab = ST.vocabulary(r["answers"]["text"][0] for r in splits["test"])
    assert unseen.loc["Answers", "Unseen in training"] == len(test_answer_vocab - train_answer_vocab)
    patterns = ST.question_pattern_table([r["question"] for r in splits["merged"]]).set_index("Pattern")
    assert patterns.loc["Begin with “under section”", "Count"] == sum(
        r["question"].lower().startswith("under section") for r in splits["merged"])
