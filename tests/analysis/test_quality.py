"""indicipr.analysis.quality and indicipr.analysis.human_audit beyond the notebooks' cell tests: the audit kit end to end through `indicipr audit`
(export, fill with known answers, score), sheet errors at the command line, the judge against a
fault-injecting OpenAI-compatible server (one retry after an invalid reply, then missing; failed
requests recorded; unreachable servers stop the run; the cache makes reruns free), and the real
local llama.cpp judge when it is installed."""

import json
from pathlib import Path

import pandas as pd
import pytest
from helpers import QA_SMALL as FIXTURE
from helpers import needs_llama_cpp, notebook_output_text, run_stage_notebook, unused_port
from standins.openai_server import OpenAIStandIn, constant, error_body

from indicipr.run import cli
from indicipr.data import config, core, qa_files
from indicipr.analysis import human_audit
from indicipr.llm import client as llm, runs as llm_runs, servers as llm_servers
from indicipr.analysis import quality as q

GOOD = {"question_specificity": 3, "answer_sufficiency": 2, "answer_minimality": 2, "legal_relevance": 3}


# ---------------------------------------------------------------- human-audit kit through the CLI
# n = 20 pairs; per criterion (A, B) with hand-computed answers:
#  clarity:     A = 2,2,3..3   B = 3,3,2,2,3..3   -> 100% joint acceptability, kappa = (0.8-0.82)/0.18 = -0.111
#  correctness: A = B (1,2,3 cycling)             -> kappa = 1
#  minimality:  A = 1x5, 3x15  B = 1x3, 2x2, 3x15 -> joint 75%, any 85%, both 1: 3, kappa 0.75, quadratic 1-0.025/0.325
N = 20
SCORES_A = {
    "question_clarity": [2, 2] + [3] * 18,
    "answer_correctness": [1 + i % 3 for i in range(N)],
    "answer_minimality": [1] * 5 + [3] * 15,
}
SCORES_B = {
    "question_clarity": [3, 3, 2, 2] + [3] * 16,
    "answer_correctness": [1 + i % 3 for i in range(N)],
    "answer_minimality": [1] * 3 + [2] * 2 + [3] * 15,
}


def fill(blank: Path, dest: Path, scores: dict, edit=None) -> Path:
    "Fill a blank sheet with `scores` (columns), optionally editing the frame, and save it as an annotator would."
    df = pd.read_csv(blank, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    for c, vals in scores.items():
        df[c] = [str(v) for v in vals]
    if edit:
        df = edit(df)
    dest.parent.mkdir(parents=True, exist_ok=True)
    df.to_csv(dest, index=False, encoding="utf-8-sig")
    return dest


def export(tmp_path, capsys, n=N, seed=3, again=False):
    "`indicipr audit export` into `tmp_path/kit` (`again`: over the kit there, which takes --force)."
    kit = tmp_path / "kit"
    argv = ["audit", "export", "--data-source", str(FIXTURE), "-n", str(n), "--seed", str(seed), "--out", str(kit)]
    assert cli.main(argv + (["--force"] if again else [])) == 0
    assert "wrote 2 sheets" in capsys.readouterr().out
    return kit


def test_export_draws_stratified_full_context_sheets(tmp_path, capsys, qa_test_records):
    kit = export(tmp_path, capsys)
    man = json.loads((kit / "manifest.json").read_text())
    recs = {r["id"]: r for r in qa_test_records}
    assert man["n"] == N and len(set(man["ids"])) == N and set(man["ids"]) <= set(recs)
    per_act = pd.Series([core.act_label(core.record_act(recs[i])) for i in recs]).value_counts()
    for act, k in man["per_act"].items():  # proportional allocation, within one of the quota
        assert abs(k - N * per_act[act] / len(recs)) < 1, (act, k)
    a = pd.read_csv(kit / "blank" / "sheet_A.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    b = pd.read_csv(kit / "blank" / "sheet_B.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    assert a.equals(b) and a["pair_id"].tolist() == man["ids"]
    for row in a.to_dict("records"):  # never truncated
        assert row["context"] == recs[row["pair_id"]]["context"] and row["answer"] in row["context"]
    again = json.loads((export(tmp_path, capsys, again=True) / "manifest.json").read_text())
    assert again["ids"] == man["ids"]  # seeded
    other = json.loads((export(tmp_path, capsys, seed=4, again=True) / "manifest.json").read_text())
    assert other["ids"] != man["ids"]


def test_score_known_answers_through_the_cli(tmp_path, capsys):
    kit = export(tmp_path, capsys)
    sa = fill(kit / "blank" / "sheet_A.csv", kit / "filled" / "sheet_A.csv", SCORES_A)
    sb = fill(
        kit / "blank" / "sheet_B.csv", kit / "filled" / "sheet_B.csv", SCORES_B, edit=lambda df: df.iloc[::-1]
    )  # row order does not matter
    figs = tmp_path / "figs"
    assert cli.main(["audit", "score", str(sa), str(sb), "--json", "--figures-dir", str(figs)]) == 0
    rows = {r["Criterion"]: r for r in json.loads(capsys.readouterr().out)}
    clar, corr, mini = rows["Question Clarity"], rows["Answer Correctness"], rows["Answer Minimality"]
    assert clar["Joint Acceptability (%)"] == 100.0 and clar["Unweighted κ"] == round((0.8 - 0.82) / 0.18, 3)
    assert corr["Unweighted κ"] == 1.0 and corr["Quadratic-Weighted κ"] == 1.0
    assert (
        mini["Joint Acceptability (%)"] == 75.0 and mini["At Least One ≥ 2 (%)"] == 85.0 and mini["Both Rated 1"] == 3
    )
    assert mini["Unweighted κ"] == 0.75 and mini["Quadratic-Weighted κ"] == round(1 - 0.025 / 0.325, 3)
    assert (figs / "tables" / "audit_results.csv").exists() and (figs / "tables" / "audit_results.tex").exists()
    # the notebook's discovery of filled sheets finds the same pair
    assert [p.name for p in human_audit.filled_sheets(kit)] == ["sheet_A.csv", "sheet_B.csv"]


@pytest.mark.parametrize(
    "edit,expect",
    [
        (
            lambda df: df.assign(answer_minimality=[""] + list(df["answer_minimality"][1:])),
            ["sheet_B.csv", "row 2", "answer_minimality is empty"],
        ),
        (
            lambda df: df.assign(question_clarity=list(df["question_clarity"][:-1]) + ["Good"]),
            ["row 21", "question_clarity is 'Good'"],
        ),
        (lambda df: df.iloc[:-1], ["do not hold the same pairs", "only in"]),
        (lambda df: df.drop(columns=["answer_correctness"]), ["missing column", "answer_correctness"]),
    ],
)
def test_bad_sheets_exit_2_naming_sheet_and_row(tmp_path, capsys, edit, expect):
    kit = export(tmp_path, capsys)
    sa = fill(kit / "blank" / "sheet_A.csv", kit / "filled" / "sheet_A.csv", SCORES_A)
    sb = fill(kit / "blank" / "sheet_B.csv", kit / "filled" / "sheet_B.csv", SCORES_B, edit=edit)
    assert cli.main(["audit", "score", str(sa), str(sb)]) == 2
    err = capsys.readouterr().err
    for e in expect:
        assert e in err, err


def test_indicipr_cli_dispatches_audit(tmp_path, capsys):
    from indicipr.run.cli import main  # the console script's module (12h_run.cli)

    kit = tmp_path / "kit"
    assert main(["audit", "export", "--data-source", str(FIXTURE), "-n", "5", "--out", str(kit)]) == 0
    assert (kit / "blank" / "sheet_B.csv").exists() and (kit / "README.md").exists()


@pytest.mark.slow
def test_notebook_stage_renders_instructions_then_scores_filled_sheets(tmp_path):
    "The stage run of 12_analysis.quality (judges off): no filled sheets -> says so and shows the kit; two -> the card's table."
    kit, figs = tmp_path / "kit", tmp_path / "figs"
    params = {
        "data_source": str(FIXTURE),
        "run_judge": False,
        "audit_folder": str(kit),
        "figures_dir": str(figs),
        "audit_pairs": N,
        "audit_seed": 3,
    }
    out1 = notebook_output_text(run_stage_notebook("12_analysis.quality", tmp_path / "out1.ipynb", params))
    assert "No human audit scored" in out1 and "human-audit kit" in out1
    assert (figs / "tables" / "audit_kit_per_act.csv").exists() and not (figs / "tables" / "audit_results.csv").exists()
    fill(kit / "blank" / "sheet_A.csv", kit / "filled" / "sheet_A.csv", SCORES_A)
    fill(kit / "blank" / "sheet_B.csv", kit / "filled" / "sheet_B.csv", SCORES_B)
    run_stage_notebook("12_analysis.quality", tmp_path / "out2.ipynb", params)
    table = pd.read_csv(figs / "tables" / "audit_results.csv").set_index("Criterion")
    assert table.loc["Answer Minimality", "Joint Acceptability (%)"] == 75.0
    assert table.loc["Question Clarity", "Joint Acceptability (%)"] == 100.0
    out2 = notebook_output_text(tmp_path / "out2.ipynb")
    assert "No human audit scored" not in out2 and "Answer Minimality" in out2 and "run_judge=False" in out2


# ---------------------------------------------------------------- the judge against a fake server
def judge_reply(first: str, retry: str):
    "A fake-server reply function: `first` to a first request, `retry` to the one retry."
    return lambda body: retry if len(body["messages"]) > 2 else first


def judge_server(reply, judges=("fake",), script=()):
    "A fake OpenAI-compatible server that lists the judges' models (for the preflight)."
    return OpenAIStandIn(list(judges), script=list(script), reply=reply)


def run(fake, records, judges=(config.Judge("fake"),), cache=None):
    "The stage's path: run_judges with every model routed to the fake server (preflight included)."
    return q.run_judges(
        records,
        judges,
        str(FIXTURE),
        llm_servers.llm_config({"*": fake.base_url}),
        q.JudgeOptions(cache, progress=False),
    )


def test_invalid_reply_is_retried_once_then_scored_and_cached(root, monkeypatch, no_llm_api_key, qa_test_records):
    recs = qa_test_records[:3]
    runner_calls = []
    real_run_requests = llm_runs.run_requests

    def spy(*args, **kw):
        runner_calls.append(len(args[1]))
        return real_run_requests(*args, **kw)

    monkeypatch.setattr(llm_runs, "run_requests", spy)  # every judge request goes through the one runner
    cache = llm.ResponseCache(root / "cache.jsonl")
    with judge_server(judge_reply("The pair looks fine.", json.dumps(GOOD))) as fake:
        out = run(fake, recs, cache=cache)["fake"]
        assert [r["status"] for r in out] == ["ok"] * 3 and all(r["attempts"] == 2 for r in out)
        assert len(fake.requests) == 6 and runner_calls == [3, 3]  # the first round, then the retries
        assert fake.gets == ["/v1/models"]  # the preflight asked once
        retry = fake.requests[3]["body"]["messages"]
        assert (
            retry[2] == {"role": "assistant", "content": "The pair looks fine."} and "not valid" in retry[3]["content"]
        )
        assert fake.requests[0]["body"]["response_format"]["type"] in ("json_schema", "json_object")
        # the judgments file is written and a rerun (resume) makes no new request
        path = q.judgments_path(str(FIXTURE), config.Judge("fake"))
        assert [r["id"] for r in qa_files.read_jsonl(path)] == [r["id"] for r in recs]
        rerun_cache = llm.ResponseCache(root / "cache.jsonl")
        again = run(fake, recs, cache=rerun_cache)["fake"]
        assert len(fake.requests) == 6 and again == out and rerun_cache.hits == 6 and runner_calls == [3, 3, 3, 3]


def test_missing_judge_model_stops_before_any_request(root, no_llm_api_key, qa_test_records):
    judges = config.judges_from_models(["gemma3:12b", "llama3.1:8b", "mistral:7b"])
    with judge_server(constant(json.dumps(GOOD)), judges=["llama3.1:8b"]) as fake:
        with pytest.raises(llm.LLMConfigError) as err:
            run(fake, qa_test_records[:2], judges)
        assert fake.requests == []
    assert (
        "2 configured model(s)" in str(err.value)
        and "gemma3:12b at" in str(err.value)
        and "mistral:7b at" in str(err.value)
    )


def test_reply_invalid_twice_is_missing_never_guessed(root, qa_test_records):
    recs = qa_test_records[:2]
    bad = json.dumps({**GOOD, "answer_minimality": 5})
    with judge_server(judge_reply(bad, "{}")) as fake:
        out = run(fake, recs)["fake"]
        assert len(fake.requests) == 4  # exactly one retry each
    assert [r["status"] for r in out] == ["invalid", "invalid"]
    assert all(r[c] is None for r in out for c in q.JUDGE_CRITERIA)
    assert "answer_minimality" in out[0]["error"] and "2nd" in out[0]["error"]
    long = q.judgments_frame(out)
    assert long["score"].isna().all()
    dist = q.score_distribution(q.rater_scores(long, ["fake"]), ["fake"])
    assert (dist["missing"] == 2).all() and dist["mean"].isna().all()


def test_rejected_request_is_recorded_as_error(root, qa_test_records):
    recs = qa_test_records[:2]
    with judge_server(
        constant(json.dumps(GOOD)), script=[("status", 400, {}, error_body("context length exceeded"))]
    ) as fake:
        out = run(fake, recs)["fake"]
    assert out[0]["status"] == "error" and "context length exceeded" in out[0]["error"]
    assert out[1]["status"] == "ok" and out[1]["answer_sufficiency"] == 2


def test_unreachable_server_stops_the_run(root, qa_test_records):
    ep = llm.Endpoint(f"http://127.0.0.1:{unused_port()}/v1", "x", timeout=1, max_retries=0)
    with pytest.raises(llm.LLMUnreachableError):
        q.judge_all(qa_test_records[:1], [config.Judge("x")], {"x": ep}, q.JudgeOptions(progress=False))


def test_ensemble_tables_from_fake_judges(root, qa_test_records):
    recs = qa_test_records[:4]
    judges = [
        config.Judge("a", params={"seed": 1}),
        config.Judge("b", params={"seed": 2}),
        config.Judge("c", params={"seed": 3}),
    ]

    def reply(body):  # judge c flags everything on legal relevance
        return json.dumps({**GOOD, "legal_relevance": 1 if body.get("seed") == 3 else 3})

    with judge_server(reply, judges=["a", "b", "c"]) as fake:
        out = run(fake, recs, judges)
    long = q.judgments_frame([r for rows in out.values() for r in rows])
    raters = q.rater_scores(long, ["a", "b", "c"])
    flagged = q.flagged_share(raters, ["a", "b", "c", "ensemble (majority)"]).set_index("criterion")
    assert flagged.loc["Legal Relevance", "c"] == 100 and flagged.loc["Legal Relevance", "ensemble (majority)"] == 0
    agree = q.judge_agreement(long, ["a", "b", "c"]).set_index("criterion")
    assert agree.loc["Legal Relevance", "% unanimous"] == 0 and agree.loc["Answer Sufficiency", "% unanimous"] == 100
    assert (agree["pairs scored by all"] == 4).all()


# ---------------------------------------------------------------- the real local judge
@pytest.mark.slow
@needs_llama_cpp
def test_local_smollm2_judge_returns_schema_valid_scores(root, qa_test_records):
    rec = min(qa_test_records, key=lambda r: len(r["context"]))  # the shortest context keeps this quick
    judge = config.settings_for("quality", "offline").judges[0]
    with llm_servers.local_llm_server(n_ctx=2048) as ep:
        out = q.judge_all(
            [rec], [judge], {judge.model: ep}, q.JudgeOptions(llm.ResponseCache(root / "c.jsonl"), progress=False)
        )[judge.name][0]
    assert out["status"] == "ok" and out["attempts"] == 1, out  # grammar-constrained: valid on the first try
    assert all(out[c] in (1, 2, 3) for c in q.JUDGE_CRITERIA)
