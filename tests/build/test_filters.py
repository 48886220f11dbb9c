"""The filter stage (indicipr.build.filters) on whole builds: real recorded candidates, malformed input,
raw parse-failure records, and byte-identical reruns. The per-filter tests on real candidates live
in notebooks/03_build.filters.ipynb."""

from __future__ import annotations

import json

import pytest
from helpers import recorded_candidates

from indicipr.build.filters import FILTERS, apply_filters, filter_build, filter_table
from indicipr.data.qa_files import JSONLError, read_jsonl, write_jsonl


def test_filter_build_on_the_recorded_candidates_is_deterministic(root):
    cands = recorded_candidates()
    write_jsonl(root / "data" / "build" / "replay" / "candidates.jsonl", cands)
    s1 = filter_build("replay")
    folder = root / "data" / "build" / "replay"
    first = {n: (folder / n).read_bytes() for n in ("filtered.jsonl", "filter_log.jsonl", "filter_summary.json")}
    s2 = filter_build("replay")
    assert s1 == s2 and first == {n: (folder / n).read_bytes() for n in first}
    log = list(read_jsonl(folder / "filter_log.jsonl"))
    survivors = list(read_jsonl(folder / "filtered.jsonl"))
    assert len(log) == len(cands) == 271 + 219  # both batches of recorded candidates
    assert survivors == [c for c, r in zip(cands, log) if r["failed"] is None]  # unchanged, in order
    assert s1["filtered"] == len(survivors) and sum(s1["excluded"].values()) == len(cands) - len(survivors)
    assert s1["excluded"]["F7"] > 0 and s1["excluded"]["F8"] > 0  # real failures exist


def test_raw_parse_failures_and_odd_types_fail_f1_without_crashing(root):
    good = recorded_candidates()[5]
    odd = [
        {
            **good,
            "question": None,
            "answer": None,
            "question_type": None,
            "parse_error": "invalid JSON: Unterminated string",
            "raw": '{"items": [{"question": "What',
        },
        {**good, "answer": 134},
        {**good, "question": ["What?"]},
        {k: v for k, v in good.items() if k != "context"},
        good,
    ]
    write_jsonl(root / "data" / "build" / "live" / "candidates.jsonl", odd)
    s = filter_build("live")
    log = list(read_jsonl(root / "data" / "build" / "live" / "filter_log.jsonl"))
    assert [r["failed"] for r in log] == ["F1", "F1", "F1", "F1", None]
    assert log[0]["reason"].startswith("unparseable reply") and s["filtered"] == 1


def test_a_malformed_candidates_line_is_named(root):
    path = root / "data" / "build" / "live" / "candidates.jsonl"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(recorded_candidates()[0]) + "\n{not json\n", encoding="utf-8")
    with pytest.raises(JSONLError, match=r"candidates\.jsonl:2"):
        filter_build("live")


def test_missing_candidates_say_which_stage_to_run(root):
    with pytest.raises(FileNotFoundError, match="02_build.generate"):
        filter_build("nothing")


def test_filters_are_sequential_first_failure_wins():
    c = recorded_candidates()[5]
    bad = {**c, "answer": "134", "question": "Is it?"}  # fails F3 (length) and F5 (question): F3 is recorded
    row = apply_filters([bad])[0]
    assert row["failed"] == "F3"
    table = filter_table(apply_filters([bad, c]))
    assert list(table.Filter[1:]) == [f for f, _, _ in FILTERS] and table.Remaining.iloc[-1] == 1
