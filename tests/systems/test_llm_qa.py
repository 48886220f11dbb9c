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


def _prompt_text(request: dict) -> str:
    return "\n".join(m["content"] for m in request["messages"])


def test_no_closed_book_prompt_holds_the_gold_context_or_8_words_of_it():
    """Every test question of the sample, in every setting of the probe: the prompt holds neither the gold context nor 8
    consecutive words of it beyond what the question itself quotes (8 of the sample's 74 test questions quote 8 words of
    their context, in every setting alike); the wrong context is another section of the same Act sharing no 8 words in a
    row with the gold context."""
    from indicipr.data import benchmark, core

    ds = benchmark.load_benchmark("sample")
    test = [dict(r) for r in ds["test"]]
    pool = [dict(r) for s in ("train", "validation", "test") for r in ds[s]]
    wrong = Q.wrong_contexts(test, pool, seed=0)
    assert set(wrong) == {r["id"] for r in test}
    quoting = 0
    for setting in Q.CLOSED_BOOK:
        for r, req in zip(test, Q.closed_book_requests(test, setting, wrong, 64)):
            text, gold = _prompt_text(req), Q.word_grams(r["context"])
            assert r["context"] not in text, (setting, r["id"])
            assert Q.word_grams(text) & gold <= Q.word_grams(r["question"]), (setting, r["id"])
            quoting += bool(Q.word_grams(r["question"]) & gold)
    assert quoting == 8 * len(Q.CLOSED_BOOK)  # the questions that quote their context, counted in each setting
    by_context = {}
    for r in pool:
        by_context.setdefault(r["context"], set()).add((core.record_act(r), r["title"]))
    for r in test:
        assert not Q.word_grams(wrong[r["id"]]) & Q.word_grams(r["context"]), r["id"]
        acts_titles = by_context[wrong[r["id"]]]
        assert {a for a, _ in acts_titles} == {core.record_act(r)} and r["title"] not in {t for _, t in acts_titles}
    assert Q.wrong_contexts(test, pool, seed=1) != wrong  # the seed draws


def test_closed_book_probe_writes_predictions_naming_their_twin(splits, monkeypatch, tmp_data_dir):
    "A replayed probe: a prediction file per model and setting under closed_book/, with its setting and its gold-context twin."
    test = splits["test"][:4]
    pool = [r for s in splits.values() for r in s]
    wrong = Q.wrong_contexts(test, pool, 0)
    replies = [
        (
            Q.closed_book_messages(r, s, wrong),
            f'{{"answer": "{r["answers"]["text"][0] if s == "wrong-context" else "no idea"}"}}',
        )
        for r in test
        for s in Q.CLOSED_BOOK
    ]
    ep = llm.replay_endpoint(replies, model="replayed")
    monkeypatch.setattr(
        llm_servers, "open_endpoints", lambda config, models, **kw: nullcontext({m: ep for m in models})
    )
    ctx = run_context(str(FIXTURE), "offline", stage="llm_qa", max_questions=4)
    probe = Q.run_closed_book(ctx)
    assert [r["system"] for r in probe["runs"]] == [
        "replayed_closed-book",
        "replayed_act-named",
        "replayed_wrong-context",
    ]
    assert probe["records"] == test and probe["asked_of"] == 4  # 4 questions, within the offline cap
    folder = Q.closed_book_dir(ctx.predictions)
    assert folder == ctx.predictions / "closed_book"
    for run in probe["runs"]:
        meta = predictions.read_prediction_meta(folder / f"{run['system']}.jsonl")
        assert meta["gold_context_system"] == "replayed_zero-shot" and meta["setting"] == Q.CLOSED_BOOK[run["setting"]]
        assert predictions.read_predictions(folder / f"{run['system']}.jsonl") == run["predictions"]
    assert set(probe["runs"][0]["predictions"].values()) == {"no idea"}
    table = Q.closed_book_table(
        test, probe, {"replayed_zero-shot": {r["id"]: r["answers"]["text"][0] for r in test}}, 200
    )
    assert table["reading gain (F1)"].tolist()[1:] == [100.0, 100.0, 0.0]
    assert Q.run_closed_book(run_context(str(FIXTURE), "offline", stage="llm_qa", closed_book=()))["runs"] == []
    sub = Q.run_closed_book(
        run_context(str(FIXTURE), "offline", stage="llm_qa", max_questions=4, closed_book_questions=2)
    )
    assert len(sub["records"]) == 2 and sub["asked_of"] == 4
    meta = predictions.read_prediction_meta(folder / "replayed_act-named.jsonl")
    assert (
        meta["setting"] == Q.CLOSED_BOOK["act-named"] + " (2 of the 4 questions, drawn with seed 0, each Act in turn)"
    )
    assert set(predictions.read_predictions(folder / "replayed_act-named.jsonl")) == {r["id"] for r in sub["records"]}


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
