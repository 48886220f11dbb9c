"""Prompted LLM baselines: replayed replies (always) and the local llama.cpp server (when installed)."""

from contextlib import nullcontext

import pytest
from helpers import QA_SMALL as FIXTURE
from helpers import needs_llama_cpp
from hypothesis import given, settings
from hypothesis import strategies as st
from standins.openai_server import OpenAIStandIn, constant

from indicipr.data.config import run_context
from indicipr.llm import client as llm, servers as llm_servers
from indicipr.scoring import predictions
from indicipr.systems import llm_qa as Q
from indicipr.scoring.metrics import token_f1


def test_replayed_run_scores_raw_and_snapped_rows(splits, monkeypatch, tmp_data_dir):
    test = splits["test"][:4]
    shots = Q.draw_shots(splits["train"], 3, 0)
    replies = [
        (Q.qa_messages(r, s), f'{{"answer": "{r["answers"]["text"][0].upper()}"}}') for r in test for s in ([], shots)
    ]
    ep = llm.replay_endpoint(replies, model="replayed")
    asked = []

    def open_endpoints(config, models, **kw):
        asked.append(list(models))
        return nullcontext({m: ep for m in models})

    monkeypatch.setattr(llm_servers, "open_endpoints", open_endpoints)
    rows = Q.run_llm_baselines(run_context(str(FIXTURE), "offline", stage="llm_qa", max_questions=4))
    assert asked == [["smollm2"]]  # the offline profile's model, opened once
    by = {r["system"]: r for r in rows}
    assert set(by) == {"replayed_zero-shot", "replayed_zero-shot_snap", "replayed_3-shot", "replayed_3-shot_snap"}
    # upper-cased gold: EM/F1 ignore case, the raw answer is not a context substring, the snapped one is
    assert by["replayed_zero-shot"]["em"] == 100.0 and by["replayed_zero-shot"]["verbatim_in_context"] == 0
    snapped = predictions.read_predictions(run_context(str(FIXTURE)).predictions / "replayed_3-shot_snap.jsonl")
    assert all(snapped[r["id"]] in r["context"] for r in test)
    meta = predictions.read_prediction_meta(run_context(str(FIXTURE)).predictions / "replayed_3-shot.jsonl")
    assert meta["shots"] == [s["id"] for s in shots] and meta["postprocess"] == "raw" and meta["temperature"] == 0


def test_configured_qa_models_are_checked_before_any_question(tmp_data_dir, no_llm_api_key):
    "A model its server does not serve stops the stage before the first request, naming every missing model."
    with OpenAIStandIn(["mistral:7b"]) as fake:
        with pytest.raises(llm.LLMConfigError) as err:
            Q.run_llm_baselines(
                run_context(
                    str(FIXTURE), "paper", stage="llm_qa", max_questions=2, llm_endpoints=f"*=ollama+{fake.base_url}"
                )
            )
        assert fake.requests == [] and fake.gets == ["/v1/models"]
    assert "2 configured model(s)" in str(err.value)
    assert (
        "llama3.1:8b at" in str(err.value)
        and "qwen2.5:7b at" in str(err.value)
        and "mistral:7b at" not in str(err.value)
    )


def test_three_shot_prompts_reach_ollama_with_a_window_that_holds_them(splits, tmp_path):
    "Through the stage's own path (predict_llm -> run_requests) an Ollama endpoint gets num_ctx >= the 3-shot prompt."
    test = splits["test"][:2]
    shots = Q.draw_shots(splits["train"], 3, 0)
    with OpenAIStandIn(["qwen2.5:7b"], reply=constant('{"answer": "x"}')) as fake:
        ep = llm.Endpoint(fake.base_url, "qwen2.5:7b", kind="ollama", timeout=5, max_retries=0)
        Q.predict_llm(ep, test, shots, llm.ResponseCache(tmp_path / "qa.jsonl"), max_tokens=256)
    for r in fake.requests:
        prompt_chars = sum(len(m["content"]) for m in r["body"]["messages"])
        assert r["path"] == "/api/chat" and r["body"]["options"]["num_ctx"] >= prompt_chars / 3 + 256
        assert r["body"]["options"]["num_ctx"] >= 2048 and r["body"]["format"] == Q.ANSWER_SCHEMA


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.sampled_from("the Controller may refuse any application for a patent within one year of filing".split()),
        min_size=1,
        max_size=8,
    )
)
def test_snap_is_a_context_span_no_worse_than_any_clause(words):
    ctx = (
        "(1) The Controller may refuse the application. (2) Any application for a patent shall be "
        "filed within one year of the date of filing in a convention country."
    )
    answer = " ".join(words)
    snapped = Q.snap_to_context(answer, ctx)
    if snapped != answer or answer not in ctx:
        if token_f1(snapped, answer) > 0:
            assert snapped in ctx
    if answer in ctx:
        assert snapped == answer
    for clause in ctx.split(". "):
        if len(clause.split()) <= 2 * len(words):
            assert token_f1(snapped, answer) >= token_f1(clause, answer) - 1e-9


@pytest.mark.slow
@needs_llama_cpp
def test_local_server_answers_and_cache_replays(splits, tmp_path):
    test = splits["test"][:3]
    shots = Q.draw_shots(splits["train"], 3, 0)
    cache = llm.ResponseCache(tmp_path / "qa.jsonl")
    with llm_servers.local_llm_server() as ep:
        raw0, snap0, st0 = Q.predict_llm(ep, test, [], cache, max_tokens=64)
        raw3, snap3, st3 = Q.predict_llm(ep, test, shots, cache, max_tokens=64)
    assert st0["parsed_json"] == 3 and st3["parsed_json"] == 3  # the schema is enforced by grammar
    assert all(isinstance(v, str) for v in raw0.values()) and all(
        snap3[r["id"]] in r["context"] or snap3[r["id"]] == raw3[r["id"]] for r in test
    )
    n = len(cache)
    assert n == 6
    dead = llm.Endpoint("http://127.0.0.1:9/v1", ep.model, kind="llama_cpp", max_retries=0)  # nothing listens there
    again, _, _ = Q.predict_llm(dead, test, [], llm.ResponseCache(tmp_path / "qa.jsonl"), max_tokens=64)
    assert again == raw0 and len(llm.ResponseCache(tmp_path / "qa.jsonl")) == n
