"""The error explorer (indicipr.analysis.explorer) and the run report in a real browser: Debian's Chromium driven by Playwright
(never a downloaded browser). The explorer page of `indicipr evaluate --out x.html` opened from file://: its class
filter shows exactly that class's count, its marked predicted span is the prediction; the report and the explorer at
400 px are no wider than the window; every predictions form `evaluate` reads gives the same scores."""

import csv
import json
import tempfile
from pathlib import Path

import pytest
from helpers import CHROMIUM_ARGS, ROOT, chromium_or_skip
from hypothesis import Phase, example, given, settings
from hypothesis import strategies as st

from indicipr.data import artifacts, core, qa_files
from indicipr.run import cli, report, runner
from indicipr.analysis import error_taxonomy, explorer
from indicipr.scoring import metrics, predictions

GOLD = ROOT / "data" / "sample" / "test_squad.jsonl"


@pytest.fixture(scope="module")
def browser():
    sync_api = pytest.importorskip("playwright.sync_api")
    exe = chromium_or_skip()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


def varied_predictions(records, shift: int = 0) -> dict[str, str]:
    """Predictions of every kind a span can be, cycling over the records: exact, run on into the next words, cut short,
    one word more at the start, elsewhere in the context, and none (left out)."""
    out = {}
    for i, r in enumerate(records):
        ctx, gold = r["context"], r["answers"]["text"][0]
        a = int(r["answers"]["answer_start"][0])
        b = a + len(gold)
        words = gold.split()
        kind = (i + shift) % 6
        if kind == 0:
            out[r["id"]] = gold
        elif kind == 1:
            out[r["id"]] = ctx[a : min(len(ctx), b + 40)].rsplit(" ", 1)[0] if b + 40 < len(ctx) else ctx[a:]
        elif kind == 2 and len(words) > 2:
            out[r["id"]] = " ".join(words[: max(1, len(words) // 2)])
        elif kind == 3 and a > 0:
            out[r["id"]] = ctx[ctx.rfind(" ", 0, a - 1) + 1 : b]
        elif kind == 4:
            out[r["id"]] = ctx[: min(len(ctx), 30)].strip()
        elif kind != 5:
            out[r["id"]] = gold
    return {k: v for k, v in out.items() if v}


def write_jsonl(path: Path, preds: dict) -> Path:
    return qa_files.write_jsonl(path, ({"id": k, "prediction_text": v} for k, v in preds.items()))


@pytest.fixture(scope="module")
def explorer_page(tmp_path_factory):
    "`indicipr evaluate --out x.html` on the sample's test split, a second system beside."
    tmp = tmp_path_factory.mktemp("explorer")
    gold = list(qa_files.read_jsonl(GOLD))
    preds = {"sysA": varied_predictions(gold), "sysB": varied_predictions(gold, shift=3)}
    paths = {n: write_jsonl(tmp / f"{n}.jsonl", p) for n, p in preds.items()}
    out = tmp / "x.html"
    assert (
        cli.main(
            [
                "evaluate",
                "--gold",
                str(GOLD),
                "--pred",
                str(paths["sysA"]),
                "--against",
                str(paths["sysB"]),
                "--resamples",
                "20",
                "--out",
                str(out),
            ]
        )
        == 0
    )
    frames = {n: metrics.score_predictions(gold, p)[0] for n, p in preds.items()}
    classes = {n: error_taxonomy.classify_errors(f).fillna(explorer.EXACT) for n, f in frames.items()}
    return out, gold, preds, classes


def test_explorer_page_holds_every_question_marked(explorer_page):
    out, gold, preds, classes = explorer_page
    page = out.read_text()
    assert page.count("<article ") == len(gold) and "http://" not in page and "https://" not in page
    for r in gold:  # every question's block of the first system, its spans marked
        block = page.split(f'data-id="{r["id"]}"', 1)[1].split("</article>", 1)[0]
        assert "<mark class=" in block, r["id"]


@pytest.mark.slow
def test_explorer_filters_and_marks_in_chromium(browser, explorer_page):
    out, gold, preds, classes = explorer_page
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(out.as_uri())

    def shown():
        return page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).length")

    assert shown() == len(gold) and page.inner_text("#count") == str(len(gold))
    for system in ("sysA", "sysB"):
        page.select_option("#system", system)
        counts = classes[system].value_counts()
        assert len(counts) >= 4, counts  # the page is tried on several classes
        for cls, n in counts.items():
            page.select_option("#cls", cls)
            assert shown() == n and page.inner_text("#count") == str(n), (system, cls)
        page.select_option("#cls", "")
    # the marked predicted span (overlap + extra words) of each answer reads as the prediction itself
    page.select_option("#system", "sysA")
    marked = page.eval_on_selector_all(
        "article",
        """els => els.map(e => [e.dataset.id,
        [...e.querySelector('.sys').querySelectorAll('mark.both, mark.extra')].map(m => m.textContent).join('')])""",
    )
    checked = [(qid, text) for qid, text in marked if qid in preds["sysA"]]
    assert len(checked) == len(preds["sysA"]) and all(text == preds["sysA"][qid] for qid, text in checked), checked[:3]
    # the Act filter and the search box narrow too; 'only where the two differ' keeps the questions they answer apart
    act = core.record_act(gold[0])
    page.select_option("#act", act)
    assert 0 < shown() == sum(core.record_act(r) == act for r in gold) < len(gold)
    page.select_option("#act", "")
    page.fill("#search", gold[5]["id"])
    assert shown() == 1
    page.fill("#search", "")
    page.check("#disagree")
    differ = sum(
        metrics.normalize_answer(preds["sysA"].get(r["id"], ""))
        != metrics.normalize_answer(preds["sysB"].get(r["id"], ""))
        or (r["id"] in preds["sysA"]) != (r["id"] in preds["sysB"])
        for r in gold
    )
    assert shown() == differ
    page.close()


@pytest.mark.slow
def test_reading_filters_change_the_count_in_chromium(browser, tmp_path):
    "A system with closed-book and grounded twins: its page shows their answers, and each reading filter shows its count."
    gold = list(qa_files.read_jsonl(GOLD))
    main = write_jsonl(tmp_path / "sysA.jsonl", varied_predictions(gold))
    closed = {r["id"]: r["answers"]["text"][0] if i % 3 == 0 else "no idea" for i, r in enumerate(gold)}
    grounded = varied_predictions(gold, shift=2)
    twins = {
        "sysA": [
            ("closed-book: the question alone", "closed", write_jsonl(tmp_path / "closed.jsonl", closed)),
            ("top-1 of bm25s", "grounded", write_jsonl(tmp_path / "grounded.jsonl", grounded)),
        ]
    }
    pages = explorer.write_run_explorers(gold, {"sysA": main}, tmp_path / "explorer", focus="sysA", twins=twins)
    em_main = metrics.score_predictions(gold, predictions.read_predictions(main))[0]["em"].to_numpy()
    em_closed = metrics.score_predictions(gold, closed)[0]["em"].to_numpy()
    without = int((em_closed == 100).sum())
    only_with = int(((em_main == 100) & (em_closed < 100)).sum())
    assert 0 < only_with < len(gold) and 0 < without < len(gold) and only_with != without
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.goto(pages["sysA"].as_uri())

    def shown():
        return page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).length")

    assert shown() == len(gold) and page.locator(".tw-closed").count() == len(gold)
    assert page.locator(".tw-grounded").count() == len(grounded)  # the answers given
    for value, n in (("without", without), ("with", only_with), ("", len(gold))):
        page.select_option("#reading", value)
        assert shown() == n and page.inner_text("#count") == str(n), value
    page.close()


@pytest.mark.slow
def test_hostile_texts_leave_the_page_working_in_chromium(browser, tmp_path):
    "A question, a prediction and a file name holding `<!--<script>` and `</script>`: every row shown, and a search filters them."
    gold = list(qa_files.read_jsonl(GOLD))[:12]
    gold[3]["question"] = "<!--<script> Who </script> decides? " + gold[3]["question"]
    gold_path = qa_files.write_jsonl(tmp_path / "gold.jsonl", gold)
    preds = varied_predictions(gold)
    preds[gold[5]["id"]] = "</script><!--<script>alert(1)</script> zebraword"
    pred_path = write_jsonl(tmp_path / "<!--<script>sys.jsonl", preds)
    out = tmp_path / "x.html"
    assert (
        cli.main(
            ["evaluate", "--gold", str(gold_path), "--pred", str(pred_path), "--resamples", "20", "--out", str(out)]
        )
        == 0
    )
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(out.as_uri())

    def shown():
        return page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).length")

    assert page.locator("article").count() == shown() == len(gold) and page.inner_text("#count") == str(len(gold))
    for term, ids in (
        ("zebraword", [gold[5]["id"]]),
        ("<!--<script> who", [gold[3]["id"]]),
        (gold[7]["id"], [gold[7]["id"]]),
    ):
        page.fill("#search", term)
        assert (
            page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).map(e => e.dataset.id)") == ids
        ), term
        assert page.inner_text("#count") == "1"
    assert page.inner_text("#system") == "<!--<script>sys" and not errors, errors
    page.close()


@pytest.mark.slow
def test_hostile_llm_answers_in_a_runs_pages_and_a_search_that_matches_nothing_in_chromium(browser, tmp_path):
    """A run's pages (`write_run_explorers`, as `reproduce` writes them) with `<!--<script>`, `</script>` and `<script>` in
    a question, a prediction, a file name and an LLM's closed-book and grounded answers: no script of theirs runs, the
    page's own does, a search filters the rows, and a search that matches nothing shows none and says so."""
    gold = list(qa_files.read_jsonl(GOLD))[:10]
    gold[2]["question"] = "<!--<script>window.__pwned = 1</script> " + gold[2]["question"]
    preds = varied_predictions(gold)
    preds[gold[4]["id"]] = "<script>window.__pwned = 2</script> quokkaword <!--"
    main = write_jsonl(tmp_path / "<!--<script>sysA.jsonl", preds)
    closed = {r["id"]: "no idea" for r in gold}
    closed[gold[6]["id"]] = "<!--<script>window.__pwned = 3</script> wombatword"
    grounded = {gold[8]["id"]: "</script><img src=x onerror='window.__pwned = 4'> numbatword <script>"}
    twins = {
        "<!--<script>sysA": [
            ("closed-book: <!--<script>", "closed", write_jsonl(tmp_path / "closed.jsonl", closed)),
            ("grounded </script>", "grounded", write_jsonl(tmp_path / "<script>grounded.jsonl", grounded)),
        ]
    }
    pages = explorer.write_run_explorers(
        gold, {"<!--<script>sysA": main}, tmp_path / "explorer", focus="<!--<script>sysA", twins=twins
    )
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.goto(pages["<!--<script>sysA"].as_uri())

    def shown_ids():
        return page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).map(e => e.dataset.id)")

    assert len(shown_ids()) == page.locator("article").count() == len(gold) and not page.is_visible("#none")
    assert page.locator(".tw-closed").count() == len(gold) and page.locator(".tw-grounded").count() == 1
    for term, ids in (
        ("quokkaword", [gold[4]["id"]]),
        ("wombatword", [gold[6]["id"]]),
        ("numbatword", [gold[8]["id"]]),
        ("<!--<script>window.__pwned = 1", [gold[2]["id"]]),
    ):
        page.fill("#search", term)
        assert shown_ids() == ids and page.inner_text("#count") == "1", term
        assert not page.is_visible("#none"), term
    page.fill("#search", "no question holds this xylophonic phrase")
    assert shown_ids() == [] and page.inner_text("#count") == "0"
    assert page.is_visible("#none") and "no rows match" in page.inner_text("#none")
    page.select_option("#reading", "without")  # another filter on an empty search result: still none
    assert shown_ids() == [] and page.is_visible("#none")
    page.select_option("#reading", "")
    page.fill("#search", "")
    assert len(shown_ids()) == len(gold) and not page.is_visible("#none")
    assert page.evaluate("window.__pwned") is None and not errors, errors
    assert page.inner_text("#system") == "<!--<script>sysA"
    page.close()


# Pieces that change how an HTML parser or a script reads text (comments, script/style/CDATA ends in any case, quotes,
# template-literal holes, JSON-in-script line ends, escapes already escaped) and handlers that would set `window.__pwned`.
HOSTILE_PIECES = [
    "<!--",
    "-->",
    "<script",
    "</script",
    "</SCRIPT ",
    "<script>window.__pwned=1</script>",
    "<",
    ">",
    "&",
    '"',
    "'",
    "`",
    "/",
    "${window.__pwned=2}",
    "\u2028",
    "\u2029",
    "\\u003c",
    "&lt;",
    "]]>",
    "<![CDATA[",
    "<style>",
    "</style>",
    "<svg onload=window.__pwned=3>",
    "<img src=x onerror=window.__pwned=4>",
    "\u202e",  # right-to-left override
    "\u200d",
    "\ufeff",
    "😀",
    "👩\u200d👩\u200d👧",
    "e\u0301",
    " ",
    "\t",
    "\n",
    "\r\n",
    "\r",
]


def hostile_text(marker: str, slash: bool = True, max_pieces: int = 10):
    """Texts of the hostile pieces, control characters (NUL aside), combining marks and characters beyond the BMP, with
    `marker` among them; `slash=False`: no `/` (a file name)."""
    pieces = [p for p in HOSTILE_PIECES if slash or "/" not in p]
    odd = st.one_of(
        st.characters(categories=["Cc"], exclude_characters="\x00"),
        st.characters(categories=["Mn", "Me"]),
        st.characters(min_codepoint=0x10000),
    )
    atom = st.one_of(st.sampled_from(pieces), odd)  # a piece half the time
    part = st.lists(atom, max_size=max_pieces).map("".join)
    return st.tuples(part, part).map(lambda ab: ab[0] + marker + ab[1])


def as_parsed(text: str) -> str:
    "`text` as the HTML parser hands it to the page: CR and CRLF read as LF (the input stream's newline normalisation)."
    return text.replace("\r\n", "\n").replace("\r", "\n")


@pytest.mark.slow
def test_fuzzed_hostile_texts_leave_the_page_working_in_chromium(browser):
    """Drawn texts of HTML- and script-parsing state changers in a question, a prediction, the system's file name and an
    LLM's closed-book answer of a run's page: no script or handler of theirs runs and the page logs no error, every row
    is shown, each text reads verbatim where the page shows it, a search for a text's marker shows its row alone and a
    search that matches nothing shows none."""
    base = list(qa_files.read_jsonl(GOLD))[:8]
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)

    def shown_ids():
        return page.eval_on_selector_all("article", "els => els.filter(e => !e.hidden).map(e => e.dataset.id)")

    # derandomized: the same 25 draws each run; a failing draw is reported as drawn (shrinking it costs a page a try)
    @settings(max_examples=25, deadline=None, derandomize=True, database=None, phases=[Phase.explicit, Phase.generate])
    @example(  # a CR in a file name, which the HTML parser reads as LF in the `<option>` the script reads back
        question="<!--<script>qz7ask",
        prediction="</script>qz7said",
        closed_answer="<img src=x onerror=window.__pwned=4>qz7shut",
        name="qz7name\r\n",
    )
    @given(
        question=hostile_text("qz7ask"),
        prediction=hostile_text("qz7said"),
        closed_answer=hostile_text("qz7shut"),
        name=hostile_text("qz7name", slash=False, max_pieces=2),
    )
    def check(question, prediction, closed_answer, name):
        gold = [dict(r) for r in base]
        gold[1]["question"] = question
        preds = varied_predictions(gold)
        preds[gold[3]["id"]] = prediction
        closed = {r["id"]: "no idea" for r in gold}
        closed[gold[5]["id"]] = closed_answer
        system = f"sys{name}"
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            main = write_jsonl(tmp / f"{system}.jsonl", preds)
            assert predictions.system_name(main) == system
            twins = {system: [("closed-book: the question alone", "closed", write_jsonl(tmp / "closed.jsonl", closed))]}
            pages = explorer.write_run_explorers(gold, {system: main}, tmp / "explorer", focus=system, twins=twins)
            errors.clear()
            page.goto(pages[system].as_uri())
        assert page.evaluate("typeof window.__pwned") == "undefined" and not errors, errors
        assert len(shown_ids()) == page.locator("article").count() == len(gold)
        assert page.inner_text("#count") == str(len(gold)) and not page.is_visible("#none")
        assert page.locator(".sys").count() == len(gold)  # each row's answer, as the script draws it

        def text(selector):
            return page.eval_on_selector(selector, "e => e.textContent")

        assert page.eval_on_selector("#system", "e => e.value") == system
        assert text("#q1 .sys .head b") == as_parsed(system)
        assert text("#q1 .q") == as_parsed(question)
        assert text("#q3 .pred") == "Prediction, not a span of the context: " + as_parsed(prediction)
        assert text("#q5 .tw-closed").startswith(f"closed-book: the question alone: {as_parsed(closed_answer)} · EM")
        for marker, row in (("qz7ask", 1), ("qz7said", 3), ("qz7shut", 5)):
            page.fill("#search", marker.upper())
            assert shown_ids() == [gold[row]["id"]] and page.inner_text("#count") == "1", marker
            assert not page.is_visible("#none"), marker
        page.fill("#search", "qz7 no row holds this")
        assert shown_ids() == [] and page.inner_text("#count") == "0" and page.is_visible("#none")
        page.fill("#search", "")
        assert len(shown_ids()) == len(gold) and not page.is_visible("#none")
        assert page.evaluate("typeof window.__pwned") == "undefined" and not errors, errors

    try:
        check()
    finally:
        page.close()


@pytest.mark.slow
def test_explorer_and_report_fit_400_px(browser, explorer_page, tmp_path, monkeypatch):
    "At 1,400 and 400 px neither the explorer nor the run report is wider than the window (tables scroll in their own box)."
    monkeypatch.syspath_prepend(ROOT / "tests" / "data")  # tests/data/test_core.py, whichever folder pytest collects
    from test_core import paper_shaped_tables

    out = explorer_page[0]
    figs = tmp_path / "figs"
    paper_shaped_tables(figs)
    artifacts.save_table(
        __import__("pandas").DataFrame({"Parameter": ["a" * 200], **{f"column {i}": [i * 1.5] for i in range(14)}}),
        "error_class_sensitivity",
        figs,
    )  # a wide table
    (figs / "explorer").mkdir()
    (figs / "explorer" / "sysA.html").write_text(out.read_text())
    index = report.write_report(
        tmp_path / "run",
        [report.StageResult(n, "ok", 1.0) for n in runner.NOTEBOOKS],
        {"data_source": "sample", "profile": "offline", "figures_dir": str(figs), "long": "/x" * 200},
        13.0,
    )
    html = index.read_text()
    assert (
        '<a href="explorer/sysA.html">sysA</a>' in html.split('id="t-error_taxonomy_focus"')[1].split("</section>")[0]
    )
    for screen in (1400, 400):
        page = browser.new_page(viewport={"width": screen, "height": 800})
        for url in (index.as_uri(), index.with_name("explorer").joinpath("sysA.html").as_uri()):
            page.goto(url)
            width = page.evaluate("[document.scrollingElement.scrollWidth, window.innerWidth]")
            assert width[0] <= width[1] == screen, (url, width)
        page.close()
    page = browser.new_page(viewport={"width": 400, "height": 800})
    page.goto(index.as_uri())
    page.click('a[href="explorer/sysA.html"] >> nth=0')  # the link opens the copied page
    assert page.url.endswith("/report/explorer/sysA.html") and page.locator("article").count() > 0
    page.close()


def test_evaluate_reads_lm_eval_samples_and_csv_like_jsonl(tmp_path, capsys):
    "An lm-eval --log_samples file and an id,prediction CSV score exactly as the equivalent JSONL."
    gold = list(qa_files.read_jsonl(GOLD))
    preds = varied_predictions(gold)
    jsonl = write_jsonl(tmp_path / "p.jsonl", preds)
    samples = tmp_path / "samples_indicipr_qa_zeroshot_2026-01-01T00-00-00.jsonl"
    docs = {r["id"]: r for r in gold}
    lines = []
    for i, (qid, text) in enumerate(preds.items()):  # as lm-eval writes them: a line per question and filter
        for f, resp in (("raw", text), ("snap", "not this one")):
            lines.append(
                json.dumps(
                    {
                        "doc_id": i,
                        "doc": docs[qid],
                        "target": "",
                        "arguments": {},
                        "resps": [[resp]],
                        "filtered_resps": [resp],
                        "filter": f,
                        "metrics": ["em", "f1", "char_f1"],
                    }
                )
            )
    samples.write_text("\n".join(lines) + "\n")
    table = tmp_path / "p.csv"
    with table.open("w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["id", "prediction"])
        w.writerows(preds.items())
    reports = []
    for p in (jsonl, samples, table):
        assert cli.main(["evaluate", "--gold", str(GOLD), "--pred", str(p), "--resamples", "20"]) == 0
        scores = capsys.readouterr().out.split("## Scores", 1)[1].split("## ", 1)[0].strip().splitlines()
        assert scores[-1].split("|")[1].strip() == predictions.system_name(p)
        reports.append(scores[-1].split("|")[2:])  # EM, F1, Char-F1, answered, missing
    assert reports[0] == reports[1] == reports[2] and len(reports[0]) >= 5
    bad = tmp_path / "bad.txt"
    bad.write_text("an answer\nanother\n")
    assert cli.main(["evaluate", "--gold", str(GOLD), "--pred", str(bad)]) == 2
    err = capsys.readouterr().err
    assert (
        "bad.txt" in err and "the forms read are" in err and "lm-evaluation-harness" in err and "Traceback" not in err
    )


def test_evaluate_page_refuses_a_folder_or_its_own_input(tmp_path, capsys):
    preds = write_jsonl(tmp_path / "p.jsonl", varied_predictions(list(qa_files.read_jsonl(GOLD))))
    (tmp_path / "page.html").mkdir()
    same = tmp_path / "p.html"
    same.write_bytes(preds.read_bytes())
    for pred, out in ((preds, tmp_path / "page.html"), (same, same)):
        assert (
            cli.main(["evaluate", "--gold", str(GOLD), "--pred", str(pred), "--resamples", "20", "--out", str(out)])
            == 2
        )
        err = capsys.readouterr().err
        assert f"--out {out}" in err and "Traceback" not in err
    assert same.read_bytes() == preds.read_bytes()  # the input is untouched
