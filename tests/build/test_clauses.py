"""The statutory structure of `indicipr.build.clauses` on every real context the project holds (both statute batches,
cleaned by the corpus stage, and the sample's recorded contexts), and the synthetic questions built from it."""

from __future__ import annotations

import pytest

from indicipr.build import clauses as C
from indicipr.data.benchmark import load_benchmark
from indicipr.build.corpus import build_contexts
from indicipr.data.qa_files import validate_qa_record


@pytest.fixture(scope="module")
def contexts(statute_sections):
    cleaned = [c["context"] for c in build_contexts(statute_sections)]
    sample = list(dict.fromkeys(r["context"] for r in load_benchmark("sample", merged=True)["merged"]))
    return cleaned + sample


def test_units_nest_and_cover_their_words(contexts):
    kinds = set()
    for text in contexts:
        units = C.statute_units(text)
        for i, u in enumerate(units):
            kinds.add(u.kind)
            assert u.start <= u.body <= u.end <= len(text)
            if u.parent is not None:  # a child lies inside its parent, one level down
                p = units[u.parent]
                assert p.start < u.start and u.end <= p.end and C.LEVELS[p.kind] < C.LEVELS[u.kind]
            a, b = C.unit_span(text, units, i)
            assert u.body <= a <= b <= u.end
    assert {"subsection", "clause", "subclause", "proviso", "explanation"} <= kinds


def test_boundaries_are_offsets_of_the_text(contexts):
    for text in contexts:
        starts, ends = C.boundary_offsets(text)
        assert starts == sorted(set(starts)) and ends == sorted(set(ends)) and starts[0] == 0
        assert all(not text[s].isspace() for s in starts if s < len(text))
        assert all(0 < e <= len(text) and not text[e - 1].isspace() for e in ends)


def test_every_synthetic_answer_is_a_span_of_its_context(contexts):
    n = 0
    for _k, text in enumerate(contexts):
        for q in C.clause_questions(text, "12") + C.gap_questions(text, "12", per_piece=2):
            assert (
                text[q["answer_start"] : q["answer_start"] + len(q["answer"])] == q["answer"]
                and q["answer"].strip() == q["answer"]
            )
            assert q["question"].endswith("?") and q["answer"] not in ("", q["question"])
            n += 1
    assert n > 5 * len(contexts)


def test_synthetic_records_of_the_sample_never_touch_held_out_sections():
    ds = load_benchmark("sample")
    train, held = [dict(r) for r in ds["train"]], [dict(r) for s in ("validation", "test") for r in ds[s]]
    syn = C.synthetic_records(train, held)
    assert all(validate_qa_record(r) for r in syn) and len({r["id"] for r in syn}) == len(syn)
    assert {r["context"] for r in syn} <= {r["context"] for r in train}
    for bad in (held[:1], [dict(held[0], context=train[0]["context"])]):
        with pytest.raises(ValueError, match="held-out section"):
            C.synthetic_records(train + bad, held)
    with pytest.raises(ValueError, match="unknown synthetic question kinds"):
        C.synthetic_records(train, held, ["cloze"])
