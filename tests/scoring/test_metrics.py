"""indicipr.scoring.metrics against an independent re-implementation of the official SQuAD v1.1 evaluation
script, on hundreds of generated cases (hypothesis), plus hand-checked statute answers, the
predictions formats and per-Act scores of ids whose Act cannot be told (the `indicipr evaluate`
command line is tested in test_errors.py, beside its module)."""

import json
import os
import re
import string
import subprocess
import tempfile
from collections import Counter

import pytest
from helpers import BIN, QA_SMALL, read_qa_small, write_prediction_file
from hypothesis import given, settings
from hypothesis import strategies as st

from indicipr.data import artifacts, config
from indicipr.scoring import metrics as M
from indicipr.data.core import InputError
from indicipr.scoring.predictions import PredictionIdError, load_gold, read_predictions


# ---------------------------------------------------------------------------------------------
# Reference: the official SQuAD v1.1 evaluation script (evaluate-v1.1.py), re-written here from
# its published algorithm, step by step in the script's own structure, to serve as the oracle.
# ---------------------------------------------------------------------------------------------
def ref_normalize_answer(s):
    def remove_articles(text):
        return re.sub(r"\b(a|an|the)\b", " ", text)

    def white_space_fix(text):
        return " ".join(text.split())

    def remove_punc(text):
        exclude = set(string.punctuation)
        return "".join(ch for ch in text if ch not in exclude)

    def lower(text):
        return text.lower()

    return white_space_fix(remove_articles(remove_punc(lower(s))))


def ref_f1_score(prediction, ground_truth):
    prediction_tokens = ref_normalize_answer(prediction).split()
    ground_truth_tokens = ref_normalize_answer(ground_truth).split()
    common = Counter(prediction_tokens) & Counter(ground_truth_tokens)
    num_same = sum(common.values())
    if num_same == 0:
        return 0
    precision = 1.0 * num_same / len(prediction_tokens)
    recall = 1.0 * num_same / len(ground_truth_tokens)
    return (2 * precision * recall) / (precision + recall)


def ref_exact_match_score(prediction, ground_truth):
    return ref_normalize_answer(prediction) == ref_normalize_answer(ground_truth)


def ref_metric_max_over_ground_truths(metric_fn, prediction, ground_truths):
    return max(metric_fn(prediction, gt) for gt in ground_truths)


def ref_evaluate(dataset, predictions):
    """The script's `evaluate`: SQuAD v1.1 nested dataset, unanswered questions score 0."""
    f1 = exact_match = total = 0
    for article in dataset:
        for paragraph in article["paragraphs"]:
            for qa in paragraph["qas"]:
                total += 1
                if qa["id"] not in predictions:
                    continue  # the script prints "Unanswered question ... will receive score 0."
                ground_truths = [a["text"] for a in qa["answers"]]
                prediction = predictions[qa["id"]]
                exact_match += ref_metric_max_over_ground_truths(ref_exact_match_score, prediction, ground_truths)
                f1 += ref_metric_max_over_ground_truths(ref_f1_score, prediction, ground_truths)
    return {"exact_match": 100.0 * exact_match / total, "f1": 100.0 * f1 / total}


# ---------------------------------------------------------------------------------------------
# Generated text: statutory words, articles in every case, ASCII and unicode punctuation, odd
# whitespace; built from tokens so that articles, punctuation and spacing collide often.
# ---------------------------------------------------------------------------------------------
WORDS = [
    "the",
    "The",
    "THE",
    "a",
    "A",
    "an",
    "An",
    "patent",
    "Patent",
    "office",
    "section",
    "sub-section",
    "(1)",
    "(a)",
    "Controller",
    "theatre",
    "another",
    "Act,",
    "1970",
    "§",
    "“work”",
    "‘mark’",
    "–",
    "—",
    "...",
    "a.",
    "an-",
    "the's",
    "don't",
    "Trade",
    "Marks",
    "İ",
    "ß",
    "é",
    "naïve",
    "२०",
]
PUNCT = list(string.punctuation) + ["§", "“", "”", "‘", "’", "–", "—", "…", "¶", "«", "»"]
SEPARATORS = [" ", "  ", "\n", "\t", "\u00a0", "", ",", ". ", "; ", " - "]

token = st.one_of(
    st.sampled_from(WORDS),
    st.sampled_from(PUNCT),
    st.text(alphabet=string.ascii_letters + string.digits, min_size=1, max_size=6),
)
answer_text = st.lists(st.tuples(token, st.sampled_from(SEPARATORS)), max_size=12).map(
    lambda parts: "".join(t + s for t, s in parts)
)
any_text = st.one_of(answer_text, st.text(max_size=40))


@settings(max_examples=400, deadline=None)
@given(any_text)
def test_normalize_matches_official(text):
    assert M.normalize_answer(text) == ref_normalize_answer(text)


@settings(max_examples=400, deadline=None)
@given(answer_text, answer_text)
def test_em_and_f1_match_official(prediction, gold):
    assert M.exact_match(prediction, gold) == float(ref_exact_match_score(prediction, gold))
    assert M.token_f1(prediction, gold) == ref_f1_score(prediction, gold)


@settings(max_examples=300, deadline=None)
@given(answer_text, st.lists(answer_text, min_size=1, max_size=4))
def test_max_over_golds_matches_official(prediction, golds):
    assert M.exact_match(prediction, golds) == float(
        ref_metric_max_over_ground_truths(ref_exact_match_score, prediction, golds)
    )
    assert M.token_f1(prediction, golds) == ref_metric_max_over_ground_truths(ref_f1_score, prediction, golds)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.lists(answer_text, min_size=1, max_size=3), st.one_of(st.none(), answer_text)),
        min_size=1,
        max_size=25,
    )
)
def test_aggregate_scores_match_official_evaluate(cases):
    """Whole prediction sets (with unanswered questions) score as the official script's `evaluate`."""
    gold, preds, qas = [], {}, []
    for i, (golds, pred) in enumerate(cases):
        qid = f"pat_{i + 1:06d}"
        context = " ".join(golds)
        gold.append(
            {
                "id": qid,
                "title": "t",
                "context": context,
                "question": "q?",
                "answers": {"text": golds, "answer_start": [context.find(g) for g in golds]},
            }
        )
        qas.append({"id": qid, "answers": [{"text": g} for g in golds]})
        if pred is not None:
            preds[qid] = pred
    official = ref_evaluate([{"paragraphs": [{"qas": qas}]}], preds)
    frame, summary = M.score_predictions(gold, preds)
    assert summary["em"] == pytest.approx(official["exact_match"], abs=1e-9)
    assert summary["f1"] == pytest.approx(official["f1"], abs=1e-9)
    assert summary["missing"] == len(cases) - len(preds)


def test_unicode_punctuation_is_kept_like_the_official_script():
    for text in ["§ 2", "“work”", "a – b", "‘mark’", "clause (a)—"]:
        assert M.normalize_answer(text) == ref_normalize_answer(text)
    assert M.normalize_answer("“work”") == "“work”"  # curly quotes stay
    assert M.exact_match('"work"', "“work”") == 0.0  # ... so ASCII and curly quotes differ
    assert M.exact_match("§ 2", "2") == 0.0
    assert M.token_f1("a – b", "b") == pytest.approx(2 * 0.5 * 1 / 1.5)  # tokens "–", "b" vs "b"


# ---------------------------------------------------------------------------------------------
# Character F1
# ---------------------------------------------------------------------------------------------
@settings(max_examples=300, deadline=None)
@given(answer_text, answer_text)
def test_char_f1_properties(prediction, gold):
    multiset, lcs = M.char_f1(prediction, gold), M.char_f1(prediction, gold, "lcs")
    assert lcs <= multiset + 1e-12  # a common substring is a common sub-multiset
    p_chars, g_chars = (ref_normalize_answer(t).replace(" ", "") for t in (prediction, gold))

    def f1_of(common):
        return 2 * common / (len(p_chars) + len(g_chars)) if common else 0.0  # 2PR/(P+R) = 2c/(|p|+|g|)

    assert multiset == pytest.approx(f1_of(sum((Counter(p_chars) & Counter(g_chars)).values())))
    assert lcs == pytest.approx(f1_of(ref_longest_common_substring(p_chars, g_chars)))
    assert multiset == pytest.approx(M.char_f1(gold, prediction))
    assert lcs == pytest.approx(M.char_f1(gold, prediction, "lcs"))
    chars_p, chars_g = (
        Counter(M.normalize_answer(prediction).replace(" ", "")),
        Counter(M.normalize_answer(gold).replace(" ", "")),
    )
    assert (multiset == 1.0) == (chars_p == chars_g and bool(chars_p))
    if M.exact_match(prediction, gold) and M.normalize_answer(gold):
        assert multiset == 1.0
        assert lcs == 1.0


def ref_longest_common_substring(a: str, b: str) -> int:
    "Longest common substring by dynamic programming (the oracle for Char-F1 LCS; the library uses difflib)."
    best, prev = 0, [0] * (len(b) + 1)
    for ca in a:
        cur = [0] * (len(b) + 1)
        for j, cb in enumerate(b, 1):
            if ca == cb:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def test_lcs_char_f1_against_brute_force():
    "LCS Char-F1 is 2c / (|p| + |g|) with c the longest common substring, found here by trying every substring."
    import itertools

    # lowercase, no space, no punctuation, no lone article: each string is its own normalized form
    for a, b in itertools.product(["", "x", "xbcxb", "zxbcy", "bcx", "patentoffice"], repeat=2):
        brute = max([k for i in range(len(a)) for k in range(1, len(a) - i + 1) if a[i : i + k] in b] or [0])
        assert brute == ref_longest_common_substring(a, b), (a, b)
        expected = 2 * brute / (len(a) + len(b)) if brute else 0.0
        assert M.char_f1(a, b, "lcs") == pytest.approx(expected), (a, b)


# ---------------------------------------------------------------------------------------------
# Hand-checked cases on real statutory answers of the fixture (recorded generations over real
# sections of the Acts).
# ---------------------------------------------------------------------------------------------
def test_hand_checked_statute_answers():
    gold = {r["id"]: r["answers"]["text"][0] for r in read_qa_small("test")}
    g = gold["pat_000022"]
    assert g == "the Indian Patents and Designs Act, 1911 (2 of 1911)"
    # gold tokens: indian patents and designs act 1911 2 of 1911 (9)
    assert M.token_f1("Indian Patents and Designs Act, 1911", g) == pytest.approx(2 * 1 * (6 / 9) / (1 + 6 / 9))
    assert M.exact_match("THE INDIAN PATENTS AND DESIGNS ACT, 1911 (2 OF 1911).", g) == 1.0
    # the prediction runs on into the rest of the sentence: + "shall be patent office under this act" (7 tokens)
    run_on = g + " shall be the patent office under this Act"
    p, r = 9 / 16, 1.0  # 16 prediction tokens, all 9 gold tokens shared: F1 = 18/25
    assert M.token_f1(run_on, g) == pytest.approx(2 * p * r / (p + r)) == pytest.approx(0.72)
    assert gold["pat_000025"] == "a seal"
    assert M.exact_match("a seal", gold["pat_000025"]) == 1.0
    # "the Central Government" vs "Central Government of India": tokens central government (2) vs central government of india (4)
    assert M.token_f1("Central Government of India", gold["pat_000023"]) == pytest.approx(2 * 0.5 * 1 / 1.5)
    # char F1 on "six months" vs "six month": chars sixmonths (9) vs sixmonth (8), 8 shared
    assert gold["tm_000025"] == "six months"
    assert M.char_f1("six month", gold["tm_000025"]) == pytest.approx(2 * 8 / 17)
    assert M.char_f1("months six", gold["tm_000025"], "lcs") == pytest.approx(2 * 6 / 18)  # "months"


# ---------------------------------------------------------------------------------------------
# Predictions files and the command line
# ---------------------------------------------------------------------------------------------
def write_formats(tmp_path, preds):
    "The same predictions in the three accepted layouts: JSONL lines, a JSON list of records, a JSON {id: text} object."
    return [
        write_prediction_file(tmp_path / "p.jsonl", preds),
        write_prediction_file(tmp_path / "p_list.json", preds, "records"),
        write_prediction_file(tmp_path / "p_dict.json", preds, "dict"),
    ]


def test_prediction_formats_score_identically(tmp_path):
    gold = read_qa_small("test")
    preds = {r["id"]: r["answers"]["text"][0] if i % 3 else r["context"][:60] for i, r in enumerate(gold) if i % 5}
    summaries = [M.score_predictions(gold, path)[1] for path in write_formats(tmp_path, preds)]
    summaries.append(M.score_predictions(gold, preds)[1])
    assert all(s == summaries[0] for s in summaries)
    assert summaries[0]["missing"] == sum(1 for i in range(len(gold)) if i % 5 == 0)
    assert summaries[0]["missing"] > 0
    # the scores themselves, by the official script's reference (missing questions score 0)
    official = ref_evaluate(
        [
            {
                "paragraphs": [
                    {"qas": [{"id": r["id"], "answers": [{"text": t} for t in r["answers"]["text"]]} for r in gold]}
                ]
            }
        ],
        preds,
    )
    assert summaries[0]["em"] == pytest.approx(official["exact_match"])
    assert summaries[0]["f1"] == pytest.approx(official["f1"])
    # ... which, on this construction, is the share of questions answered with their gold answer
    assert official["exact_match"] == pytest.approx(
        100 * sum(1 for i in range(len(gold)) if i % 5 and i % 3) / len(gold)
    )


def test_unknown_ids_are_an_error_naming_them(tmp_path):
    gold = read_qa_small("test")
    path = write_formats(tmp_path, {gold[0]["id"]: "x", "pat_999999": "y", "zz_1": "z"})[0]
    with pytest.raises(PredictionIdError, match=r"pat_999999.*zz_1|zz_1.*pat_999999") as e:
        M.score_predictions(gold, path)
    assert str(path) in str(e.value)
    assert "2 prediction id(s)" in str(e.value)


def test_bad_prediction_file_names_the_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text('{"id": "pat_000021", "prediction_text": "x"}\n{"id": "pat_000022", "prediction_text": 3}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2"):
        M.score_predictions(read_qa_small("test"), path)


def test_per_act_scores_never_fail_on_an_unknown_prefix():
    gold = read_qa_small("test")
    renamed = [{**r, "id": r["id"].replace("pat_", "zzq_")} for r in gold]
    frame, summary = M.score_predictions(renamed, {r["id"]: r["answers"]["text"][0] for r in renamed})
    table = M.per_act_table(frame).set_index("Act")
    n = sum(r["id"].startswith("zzq_") for r in renamed)
    assert n > 0
    assert table.loc["Unknown", "Test samples"] == n
    assert table.loc["Unknown", "EM"] == 100.0
    assert "Patents" not in table.index
    assert table["Test samples"].sum() == len(gold)
    assert M.unknown_act_ids(frame) == [r["id"] for r in renamed if r["id"].startswith("zzq_")]


def test_a_csv_answer_with_an_unquoted_comma_is_refused_not_cut(tmp_path):
    "A row longer than its header would have been scored with its answer cut at the first comma (EM 0 for an exact answer)."
    gold = read_qa_small("test")[:3]
    lines = ["id,prediction_text"] + [f"{r['id']},{r['answers']['text'][0]}" for r in gold]
    lines[2] = f"{gold[1]['id']},the Registrar, or the Board"  # line 3 of the file
    path = tmp_path / "p.csv"
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(
        InputError, match=r"p\.csv:3: 3 columns, the header has 2: an answer holding a comma must be quoted"
    ):
        M.score_predictions(gold, path)
    lines[2] = f'{gold[1]["id"]},"the Registrar, or the Board"'
    path.write_text("\n".join(lines) + "\n")
    assert read_predictions(path)[gold[1]["id"]] == "the Registrar, or the Board"  # quoted: read whole


def test_a_pipe_is_read_once(tmp_path):
    "`--pred <(cat f)` and `/dev/stdin` are streams: a second read of the file found nothing ('no predictions')."
    gold = read_qa_small("test")
    body = "".join(json.dumps({"id": r["id"], "prediction_text": r["answers"]["text"][0]}) + "\n" for r in gold)
    r, w = os.pipe()
    os.write(w, body.encode())
    os.close(w)
    try:
        assert read_predictions(f"/dev/fd/{r}") == {x["id"]: x["answers"]["text"][0] for x in gold}
    finally:
        os.close(r)
    proc = subprocess.run(
        [str(BIN / "indicipr"), "evaluate", "--gold", str(QA_SMALL / "test_squad.jsonl"), "--pred", "/dev/stdin"],
        input=body,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and "no predictions" not in proc.stderr, proc.stderr[-2000:]
    assert "100.00" in proc.stdout  # every gold answer, scored
    page = tmp_path / "page.html"  # the report and the error explorer: two readers of the one stream
    proc = subprocess.run(
        [str(BIN / "indicipr"), "evaluate", "--gold", str(QA_SMALL / "test_squad.jsonl"), "--pred", "/dev/stdin"]
        + ["--out", str(page)],
        input=body,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0 and page.stat().st_size > 0, proc.stderr[-2000:]


def test_a_gold_record_with_an_empty_id_is_a_problem_naming_file_and_line(tmp_path, capsys):
    records = read_qa_small("test")[:3]
    records[1] = {**records[1], "id": ""}
    path = tmp_path / "gold.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    kept = load_gold(path)
    assert [r["id"] for r in kept] == [records[0]["id"], records[2]["id"]]  # never scored and named as ""
    assert f"{path}:2: empty id" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"gold\.jsonl:2: empty id"):
        load_gold(path, strict=True)


def test_a_run_outside_the_main_job_never_overwrites_its_predictions(tmp_data_dir, monkeypatch):
    "A papermill run of notebook 07 on the validation split wrote over the test predictions notebook 10 compares."
    from indicipr.systems import bm25
    from indicipr.data import core
    from indicipr.data.config import run_context
    from indicipr.scoring import predictions

    main = predictions.main_predictions_dir(str(QA_SMALL))
    (core.project_root() / "runs").mkdir(exist_ok=True)
    with monkeypatch.context() as m, tempfile.TemporaryDirectory(dir=core.project_root() / "runs") as run:
        with core.main_job_token(run) as proof:  # the main job's run, as `indicipr reproduce` makes it
            m.setenv(core.MAIN_JOB_ENV, proof)
            bm25.run_bm25(run_context(str(QA_SMALL), stage="bm25"))
    before = {p.name: p.read_bytes() for p in main.iterdir()}
    assert "bm25_retrieval.jsonl" in before
    own = run_context(str(QA_SMALL)).predictions
    assert own == tmp_data_dir / "runs" / "interactive" / "predictions" / "qa_small"
    assert predictions.prediction_files(str(QA_SMALL), own=own) == sorted(
        main.glob("*.jsonl")
    )  # none of its own: the main job's
    bm25.run_bm25(
        run_context(str(QA_SMALL), stage="bm25", split="validation")
    )  # a plain papermill run, `-p split validation`
    assert {p.name: p.read_bytes() for p in main.iterdir()} == before
    assert predictions.prediction_files(str(QA_SMALL), own=own) == sorted(own.glob("*.jsonl"))  # its own, now
    monkeypatch.setenv(artifacts.RUN_DIR_ENV, str(tmp_data_dir / "run"))  # under the runner: the run's folder
    assert run_context(str(QA_SMALL)).predictions == tmp_data_dir / "run" / "predictions" / "qa_small"


def test_a_split_value_is_named_as_the_parameter_the_user_typed():
    "Inside a notebook `-p split testt` was reported as `--gold 'testt'`, a flag nobody typed."
    with pytest.raises(InputError) as e:
        config.run_context("sample", "offline", None, "bm25", split="testt")
    assert str(e.value) == "parameter split: 'testt' is not one of train, validation, test"
    with pytest.raises(InputError, match="^--tune-split: 'dev' is not one of"):
        config.settings_for("grounded", "offline", names="flag", tune_split="dev")
    with pytest.raises(InputError, match="^parameter split 'testt' is neither a split name"):
        load_gold("testt", option="parameter split")
    with pytest.raises(InputError, match="^--gold 'testt' is neither a split name"):
        load_gold("testt")
