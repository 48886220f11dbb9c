"""Error taxonomy, answer structure, dataset statistics and the `indicipr evaluate` command line on
the real-statute fixture."""

import re
from collections import Counter

import pytest
from helpers import QA_SMALL as FIXTURE
from helpers import read_qa_small, read_qa_small_all, write_prediction_file

from indicipr.run import cli
from indicipr.data import core
from indicipr.analysis import error_analysis as E
from indicipr.analysis import error_taxonomy as T
from indicipr.scoring import metrics as M
from indicipr.build import split as SP
from indicipr.build import stats as ST


def gold_parts(rec):
    return rec["answers"]["text"], rec["context"], rec["answers"]["answer_start"]


def record(qid):
    "One record of the qa_small fixture (real statute text) by id."
    return next(r for r in read_qa_small("merged") if r["id"] == qid)


def span_of(context, first, last):
    "The span of `context` from the first `first` to the end of the next `last`: an extractive prediction."
    i = context.index(first)
    return context[i : context.index(last, i) + len(last)]


def n_tokens(text):
    return len(M.normalize_answer(text).split())


# One extractive prediction per case: (record, first words, last words, span relation to the gold). The records are
# Designs Act s. 19(1) (grounds (a)-(e) for cancellation, joined by '; or'), Geographical Indications Act s. 2(1)
# (definitions (a)-(d)) and Patents Act s. 6(1) (applicants (a)-(c)).
CASES = {
    "span_boundary": [
        ("des_000022", "that it has been published", "original design", "contains"),  # (b) run into (c)
        ("gi_000001", "the Appellate Board established", "authorised user”", "contains"),  # (a) run into (b)
        ("gi_000001", "the Appellate Board established", "(47 of 1999)", "contains"),  # 3 tokens more
        ("des_000022", "country prior", "(c) that the design is", "crossing"),  # both ends wrong
        ("des_000022", "published in", "the date of", "inside"),
    ],  # cut short
    "minor_word": [
        ("des_000022", "(b) that it has been", "registration; or", "contains"),  # with its label and its 'or'
        ("gi_000001", "means the Appellate Board", "Act, 1999", "contains"),  # with the definition's 'means'
        ("pat_000007", "claiming to be", "of the invention", "inside"),
    ],  # 'any person' left out
    "partial_overlap": [
        ("gi_000001", "Trade Marks Act", "“authorised user” means the authorised user", "crossing"),
        ("pat_000007", "the invention; (b)", "the assignee", "crossing"),
    ],
    "low_overlap": [
        ("des_000022", "(a) that the design", "in India;", "disjoint"),  # ground (a), sharing its words
        ("gi_000001", "the Code of Civil", "1908", "disjoint"),
        ("pat_000008", "application", "application", "inside"),
    ],  # a one-word piece, F1 0.33
    "completely_wrong": [
        ("des_000022", "the High Court", "Court", "disjoint"),
        ("gi_000001", "“district court”", "meaning", "disjoint"),
    ],
}


def check_cases(kind):
    "Every case of `kind` is a span of its context, has the relation written beside it and lands in `kind`."
    for qid, first, last, relation in CASES[kind]:
        rec = record(qid)
        golds, context, starts = gold_parts(rec)
        pred = span_of(context, first, last)
        evidence = T.error_evidence(pred, golds, context, starts)
        assert evidence["relation"] == relation, (qid, pred, evidence)
        assert T.classify_error(pred, golds, context, starts) == kind, (qid, pred, evidence)
        yield pred, golds[evidence["gold"]], evidence


def test_span_boundary_errors_on_real_sections():
    "The spans overlap and the prediction is mostly the answer (F1 >= BOUNDARY_F1), more than a few tokens off."
    for pred, gold, ev in check_cases("span_boundary"):
        assert M.token_f1(pred, gold) >= T.BOUNDARY_F1 and ev["relation"] != "disjoint"
        assert ev["differing_tokens"] > T.MINOR_WORD_MAX_TOKENS or ev["f1"] < T.MINOR_WORD_F1


def test_minor_word_differences_on_real_sections():
    "An extractive prediction a few tokens off the gold at its edges, with a high F1."
    for pred, gold, ev in check_cases("minor_word"):
        assert M.token_f1(pred, gold) >= T.MINOR_WORD_F1
        assert (
            abs(n_tokens(pred) - n_tokens(gold)) == ev["differing_tokens"] <= T.MINOR_WORD_MAX_TOKENS
        )  # nested: only added or only dropped


def test_partial_overlap_on_real_sections():
    "Crossing spans that share a fair part of each other, but not most."
    for pred, gold, _ev in check_cases("partial_overlap"):
        assert T.PARTIAL_OVERLAP_F1 <= M.token_f1(pred, gold) < T.BOUNDARY_F1


def test_low_overlap_on_real_sections():
    "Some shared words: a span elsewhere in the section, or a short piece of the answer."
    for pred, gold, ev in check_cases("low_overlap"):
        f1 = M.token_f1(pred, gold)
        assert f1 > 0 and (ev["relation"] == "disjoint" or f1 < T.BOUNDARY_F1)


def test_completely_wrong_on_real_sections():
    for pred, gold, ev in check_cases("completely_wrong"):
        assert M.token_f1(pred, gold) == 0 and ev["relation"] == "disjoint"


def test_the_issues_edge_cases():
    "A one-word piece (F1 0.33) is not a boundary error; a crossing span with a high F1 is not partial overlap."
    golds, context, starts = gold_parts(record("pat_000008"))  # 'the right to make such an application': 5 tokens
    ev = T.error_evidence("application", golds, context, starts)
    assert ev["relation"] == "inside" and ev["f1"] == pytest.approx(1 / 3)
    assert T.classify_error("application", golds, context, starts) == "low_overlap"
    golds, context, starts = gold_parts(record("pat_000007"))
    crossing = span_of(context, "claiming to be", "(b) by")  # drops 'any person', adds 'b by'
    ev = T.error_evidence(crossing, golds, context, starts)
    assert ev["relation"] == "crossing" and ev["f1"] > 0.8
    assert T.classify_error(crossing, golds, context, starts) == "span_boundary"


def test_extractive_spans_reach_every_class():
    "Word-aligned spans of real contexts (what an extractive model can return) land in all five of the card's classes."
    seen = Counter()
    for rec in read_qa_small("test"):
        golds, context, starts = gold_parts(rec)
        words = [m.span() for m in re.finditer(r"\S+", context)]
        first = next(i for i, (a, b) in enumerate(words) if b > starts[0])
        for i in range(max(0, first - 6), min(len(words), first + 6), 2):
            for n in (1, 3, 8, 20):
                if i + n > len(words):
                    continue
                pred = context[words[i][0] : words[i + n - 1][1]]
                kind = T.classify_error(pred, golds, context, starts)
                seen[kind] += 1
                if kind == "completely_wrong":
                    assert T.error_evidence(pred, golds, context, starts)["f1"] == 0
    assert set(core.CARD["errors"]) <= set(seen), seen


def test_taxonomy_on_real_answers():
    """Runs-on and cuts of every fixture answer land where the rules say, by the number of tokens they add or drop."""
    checked = Counter()
    for rec in read_qa_small("merged"):
        golds, context, starts = gold_parts(rec)
        gold, start = golds[0], starts[0]
        words = gold.split()
        rest = context[start + len(gold) :].split()
        if len(words) < 4 or len(rest) < 6 or len(golds) > 1:
            continue
        assert T.classify_error(gold, golds, context, starts) is None
        assert T.classify_error(gold.upper() + ".", golds, context, starts) is None
        for n in range(1, 7):  # run on by n words of the context
            run_on = context[start : context.index(rest[n - 1], start + len(gold)) + len(rest[n - 1])]
            added, f1 = n_tokens(run_on) - n_tokens(gold), M.token_f1(run_on, gold)
            if added == 0:
                continue
            kind = T.classify_error(run_on, golds, context, starts)
            if added <= T.MINOR_WORD_MAX_TOKENS and f1 >= T.MINOR_WORD_F1:
                assert kind == "minor_word", (rec["id"], run_on)
            elif f1 >= T.BOUNDARY_F1:
                assert kind == "span_boundary", (rec["id"], run_on)
            else:
                assert kind == "low_overlap", (rec["id"], run_on)  # the answer drowned in what follows it
            checked[kind] += 1
        truncated = " ".join(words[: len(words) // 2])
        if M.exact_match(truncated, golds) == 0 and context.find(truncated, start) == start and n_tokens(truncated):
            dropped, f1 = n_tokens(gold) - n_tokens(truncated), M.token_f1(truncated, gold)
            expected = (
                "minor_word"
                if dropped <= T.MINOR_WORD_MAX_TOKENS and f1 >= T.MINOR_WORD_F1
                else "span_boundary"
                if f1 >= T.BOUNDARY_F1
                else "low_overlap"
            )  # 'author' of 'the author who dies last'

            assert T.classify_error(truncated, golds, context, starts) == expected, rec["id"]
            checked["truncated"] += 1
        assert T.classify_error("zzzz qqqq", golds, context, starts) == "completely_wrong"
    assert checked["span_boundary"] > 50 and checked["minor_word"] > 20 and checked["truncated"] > 50, checked


def test_report_card_table_lines_up_with_the_taxonomy_labels():
    "The report's card table for the errors has the taxonomy's labels, in its order, with the card's counts."
    from indicipr.run import report

    columns, rows = report.card_table("errors")
    frame, _ = M.score_predictions(read_qa_small("test"), {})
    table = T.error_taxonomy_table(frame, card=True)
    labels = [T.ERROR_TYPES[k] for k in core.CARD["errors"]]
    assert [r[0] for r in rows] == labels == table["Error type"].tolist()[:5]
    assert [int(r[1]) for r in rows] == table["Card count"].tolist()[:5] == list(core.CARD["errors"].values())


def test_taxonomy_table_counts_every_non_exact_prediction():
    gold = read_qa_small("test")
    preds = {}
    for i, r in enumerate(gold):
        a, c = r["answers"]["text"][0], r["context"]
        preds[r["id"]] = [a, c[:40], a + " " + c[-30:], "zzzz"][i % 4]
    frame, summary = M.score_predictions(gold, preds)
    table = T.error_taxonomy_table(frame)
    n_non_exact = int((frame["em"] < 100).sum())
    assert table["Count"].sum() == n_non_exact > 0
    assert table["Percentage"].sum() == pytest.approx(100.0)
    assert table.set_index("Error type").loc["Completely wrong", "Count"] >= len(gold) // 4


def test_clause_markers_on_real_answers():
    by_id = {r["id"]: r["answers"]["text"][0] for r in read_qa_small("merged")}
    multi = [a for a in by_id.values() if E.is_multi_clause(a)]
    assert any("(b) cinematograph films" in a for a in multi)
    for a in by_id.values():
        if "sub-section (" in a and ";" not in a and "provided" not in a.lower():
            assert not E.is_multi_clause(a), a


def test_answer_structure_groups_partition_the_questions():
    gold = read_qa_small("test")
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
    splits = read_qa_small_all()
    glance = dict(ST.glance_table(splits).values)
    assert glance["Total QA pairs"] == 271 and glance["Test samples"] == len(splits["test"])
    contexts = {r["context"] for r in splits["merged"]}
    assert glance["Retained statutory contexts"] == len(contexts)
    assert glance["Average context length (words)"] == round(sum(len(c.split()) for c in contexts) / len(contexts), 1)
    dist = SP.per_act_distribution(splits).set_index("Act")
    assert dist.loc["Total", "Full dataset"] == 271 and dist.drop("Total")["Test set"].sum() == len(splits["test"])
    unseen = ST.unseen_vocabulary_table(splits["train"], splits["test"]).set_index("Field")
    train_answer_vocab = ST.vocabulary(r["answers"]["text"][0] for r in splits["train"])
    test_answer_vocab = ST.vocabulary(r["answers"]["text"][0] for r in splits["test"])
    assert unseen.loc["Answers", "Unseen in training"] == len(test_answer_vocab - train_answer_vocab)
    patterns = ST.question_pattern_table([r["question"] for r in splits["merged"]]).set_index("Pattern")
    assert patterns.loc["Begin with “under section”", "Count"] == sum(
        r["question"].lower().startswith("under section") for r in splits["merged"]
    )


def test_evaluate_cli_report(tmp_path, capsys):
    gold = read_qa_small("test")
    good = {r["id"]: r["answers"]["text"][0] for r in gold[:-2]}
    weak = {r["id"]: r["context"][:80] for r in gold}
    write_prediction_file(tmp_path / "good.jsonl", good)
    write_prediction_file(tmp_path / "weak.json", weak)
    out = tmp_path / "rep" / "report.md"
    rc = cli.main(
        [
            "evaluate",
            "--gold",
            str(FIXTURE / "test_squad.jsonl"),
            "--pred",
            str(tmp_path / "good.jsonl"),
            "--against",
            str(tmp_path / "weak.json"),
            "--out",
            str(out),
            "--resamples",
            "500",
        ]
    )
    assert rc == 0
    report = out.read_text()
    assert report in capsys.readouterr().out
    n = len(gold)
    em = 100 * (n - 2) / n
    assert re.search(rf"\| good +\| +{em:.2f} \| +{em:.2f} \|", report)
    assert "2 question(s)" in report and gold[-1]["id"] in report
    for heading in ["Per-Act scores", "Error taxonomy", "Answer structure", "Paired bootstrap"]:
        assert heading in report
    row = next(line for line in report.splitlines() if line.startswith("| good ") and "weak" in line)
    assert row.rstrip(" |").endswith("True")  # good beats weak, Holm-significant


def test_evaluate_cli_errors(tmp_path, capsys):
    write_prediction_file(tmp_path / "p.json", {"nope_000001": "x"})
    rc = cli.main(["evaluate", "--gold", str(FIXTURE / "test_squad.jsonl"), "--pred", str(tmp_path / "p.json")])
    assert rc == 2 and "nope_000001" in capsys.readouterr().err
    rc = cli.main(["evaluate", "--gold", str(tmp_path / "missing.jsonl"), "--pred", str(tmp_path / "p.json")])
    assert rc == 2 and "missing.jsonl" in capsys.readouterr().err


def test_indicipr_evaluate_command_reaches_the_report(tmp_path, capsys):
    "`indicipr evaluate` (the one CLI, indicipr.run.cli) prints the report of indicipr.analysis.error_analysis on stdout."
    gold = read_qa_small("test")
    write_prediction_file(tmp_path / "p.json", {r["id"]: r["answers"]["text"][0] for r in gold})
    rc = cli.main(
        [
            "evaluate",
            "--gold",
            str(FIXTURE / "test_squad.jsonl"),
            "--pred",
            str(tmp_path / "p.json"),
            "--resamples",
            "50",
        ]
    )
    out = capsys.readouterr()
    assert rc == 0, out.err
    assert "# Evaluation of p" in out.out and "| p " in out.out


def test_focus_system_tables_with_the_card_beside_them():
    "The focus system's taxonomy and structure tables carry the card's InLegalBERT figures only when asked."
    gold = read_qa_small("test")
    preds = {r["id"]: (r["answers"]["text"][0] if i % 3 else r["context"][:50]) for i, r in enumerate(gold)}
    frame, _ = M.score_predictions(gold, preds)
    tax = T.error_taxonomy_table(frame, card=True).set_index("Error type")
    assert tax["Card count"].sum() == sum(core.CARD["errors"].values()) == 125
    assert tax["Count"].sum() == int((frame["em"] < 100).sum())
    assert "Card count" not in T.error_taxonomy_table(frame)
    st = E.answer_structure_table(frame, card=True)
    assert st["Card value"].notna().all() and set(st["Card metric"]) <= {
        "EM",
        "F1",
    }  # every group present has the card's figure


def test_evaluate_report_among_the_committed_tables_only_in_the_main_job(root, request):
    """Stage 11 writes `evaluate_<focus>.md` among the tables of `figures/`: `evaluate_files` allows that for the main
    job (`main_job=True`, as `errors_stage` passes `ctx.main_job`) and refuses it otherwise, writing nothing."""
    gold = read_qa_small("test")
    pred = write_prediction_file(root / "p.jsonl", {r["id"]: r["answers"]["text"][0] for r in gold})
    out = root / "figures" / "tables" / "evaluate_p.md"
    with pytest.raises(core.InputError, match="main job"):
        E.evaluate_files(FIXTURE / "test_squad.jsonl", pred, out=out, n_resamples=100)
    assert not out.exists()
    with pytest.raises(core.InputError, match="main job"):  # the argument alone is no main job: the write is refused
        E.evaluate_files(FIXTURE / "test_squad.jsonl", pred, out=out, n_resamples=100, main_job=True)
    assert not out.exists()
    request.getfixturevalue("main_job")  # the main job's run, as its kernels are
    report = E.evaluate_files(FIXTURE / "test_squad.jsonl", pred, out=out, n_resamples=100, main_job=True)
    assert out.read_text() == report
