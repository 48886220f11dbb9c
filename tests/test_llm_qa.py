"""Prompted LLM baselines: replayed replies (always) and the local llama.cpp server (when installed)."""
import os
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from indicipr import core, llm, llm_qa as Q
from indicipr.metrics import token_f1

FIXTURE = Path(__file__).parent / "fixtures" / "qa_small"
try:
    import llama_cpp  # noqa: F401
    HAVE_LLAMA = True
except ImportError:
    HAVE_LLAMA = False
needs_server = pytest.mark.skipif(not HAVE_LLAMA and not os.environ.get("CI"), reason="llama-cpp-python not installed")


@pytest.fixture(scope="module")
def splits():
    return {k: [dict(r) for r in v] for k, v in core.load_benchmark(str(FIXTURE)).items()}


def test_replayed_run_scores_raw_and_snapped_rows(splits, monkeypatch, tmp_path):
    test = splits["test"][:4]
    shots = Q.draw_shots(splits["train"], 3, 0)
    replies = [(Q.build_messages(r, s), f'{{"answer": "{r["answers"]["text"][0].upper()}"}}')
               for r in test for s in ([], shots)]
    ep = llm.replay_endpoint(replies, model="replayed")
    monkeypatch.setattr(core, "data_dir", lambda: tmp_path)
    monkeypatch.setattr(llm, "open_endpoint", lambda profile, model=None: _ctx(ep))
    rows = Q.run_llm_baselines(str(FIXTURE), "offline", max_questions=4)
    by = {r["system"]: r for r in rows}
    assert set(by) == {"replayed_zero-shot", "replayed_zero-shot_snap", "replayed_3-shot", "replayed_3-shot_snap"}
    # upper-cased gold: EM/F1 ignore case, the raw answer is not a context substring, the snapped one is
    assert by["replayed_zero-shot"]["em"] == 100.0 and by["replayed_zero-shot"]["verbatim_in_context"] == 0
    snapped = core.read_predictions(tmp_path / "predictions" / "qa_small" / "replayed_3-shot_snap.jsonl")
    assert all(snapped[r["id"]] in r["context"] for r in test)
    meta = core.read_prediction_meta(tmp_path / "predictions" / "qa_small" / "replayed_3-shot.jsonl")
    assert meta["shots"] == [s["id"] for s in shots] and meta["postprocess"] == "raw" and meta["temperature"] == 0


class _ctx:
    def __init__(self, ep): self.ep = ep
    def __enter__(self): return self.ep
    def __exit__(self, *a): return False


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from("the Controller may refuse any application for a patent within one year of filing".split()),
                min_size=1, max_size=8))
def test_snap_is_a_context_span_no_worse_than_any_clause(words):
    ctx = ("(1) The Controller may refuse the application. (2) Any application for a patent shall be "
           "filed within one year of the date of filing in a convention country.")
    answer = " ".join(words)
    snapped = Q.snap_to_context(answer, ctx)
    if snapped != answer or answer not in ctx:
        if token_f1(snapped, answer) > 0: assert snapped in ctx
    if answer in ctx: assert snapped == answer
    for clause in ctx.split(". "):
        if len(clause.split()) <= 2 * len(words):
            assert token_f1(snapped, answer) >= token_f1(clause, answer) - 1e-9


@needs_server
def test_local_server_answers_and_cache_replays(splits, tmp_path):
    test = splits["test"][:3]
    shots = Q.draw_shots(splits["train"], 3, 0)
    cache = llm.ResponseCache(tmp_path / "qa.jsonl")
    with llm.local_llm_server() as ep:
        raw0, snap0, st0 = Q.predict_llm(ep, test, [], cache, max_tokens=64)
        raw3, snap3, st3 = Q.predict_llm(ep, test, shots, cache, max_tokens=64)
    assert st0["parsed_json"] == 3 and st3["parsed_json"] == 3            # the schema is enforced by grammar
    assert all(isinstance(v, str) for v in raw0.values()) and all(snap3[r["id"]] in r["context"] or snap3[r["id"]] == raw3[r["id"]] for r in test)
    n = len(cache)
    assert n == 6
    dead = llm.Endpoint("http://127.0.0.1:9/v1", ep.model, kind="llama_cpp", max_retries=0)   # nothing listens there
    again, _, _ = Q.predict_llm(dead, test, [], llm.ResponseCache(tmp_path / "qa.jsonl"), max_tokens=64)
    assert again == raw0 and len(llm.ResponseCache(tmp_path / "qa.jsonl")) == n
