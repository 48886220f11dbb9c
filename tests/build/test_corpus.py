"""The corpus stage (indicipr.build.corpus, with indicipr.build.cleaning and indicipr.build.statutes): the cleaner keeps every statutory word, and the
India Code PDF path gives back exactly what the section JSONL path gives.

* Editorial forms: `tests/fixtures/corpus/editorial_forms.jsonl` holds real sections dressed in every
  editorial form the India Code text uses (a note in front of the substituted words inside one bracket
  pair, inline notes in brackets and parentheses, numbered footnote blocks with Subs./Ins./Omitted/ibid./
  Ibid. lines, footnote digits glued to words, brackets and stars; amendment histories, renumbering
  notes, undated `Inserted by …` notes with or without brackets, `[Omitted]`, and the second batch's heading
  forms), each with its expected cleaned units.
* The cleaner check (`indicipr cleaner-check`) prints 0 leftovers and 0 lost statutory words on every
  section the project holds, and reports more than 0 for a broken cleaner and for a naive one that
  loses the words a note stands before.
* PDFs: `tests/standins/india_code_pdf.py` typesets the seven Acts in the India Code layout; reading
  them back with `read_statute_pdf` recovers every section, its number and title, and its cleaned text.
"""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

import indicipr.build.cleaning as cleaning
import indicipr.build.corpus as corpus
from indicipr.run import cli
from indicipr.build.cleaning import clean_section, is_toc_page
from indicipr.data.core import ACTS
from indicipr.build.corpus import (
    build_contexts,
    check_section,
    cleaner_check_table,
    editorial_leftovers,
    section_contexts,
)
from indicipr.build.statutes import read_official_pdfs, read_pdf_pages, read_statute_pdf
from indicipr.build.sections import read_sections_jsonl, statutes_jsonl_paths

FIXTURE = Path(__file__).parents[1] / "fixtures" / "corpus" / "editorial_forms.jsonl"
FORMS = read_sections_jsonl(FIXTURE)


# ---------------------------------------------------------------- the cleaner and its check


@pytest.mark.parametrize("rec", FORMS, ids=[f"{r['act']}-{r['section']}" for r in FORMS])
def test_every_editorial_form_goes_and_every_statutory_word_stays(rec):
    assert clean_section(rec)["units"] == rec["expected_units"], rec["form"]
    check = check_section(rec)
    assert check["leftovers"] == [] and not check["lost"], rec["form"]


def _cleaner_that_loses_words(text: str) -> str:
    "A naive note removal: a note regex running to the first `]`, and nothing tidying what a removed note left."
    old_note = re.compile(r"\[\s*\(?\s*Note\s*:.*?\)?\s*\]", re.S | re.I)
    for rx in (old_note, cleaning._BRACKET_NOTE, cleaning._INLINE_NOTE, cleaning._STARS):
        text = rx.sub("\x00", text)
    return cleaning._EMPTY_CLAUSE.sub("", text).replace("\x00", "")


def test_the_check_catches_lost_words_and_empty_brackets(monkeypatch):
    monkeypatch.setattr(cleaning, "remove_editorial_notes", _cleaner_that_loses_words)
    checks = {(r["act"], r["section"]): check_section(r) for r in FORMS}
    # the note before substituted words took the words along: a clause (copyright 13) and a proviso (copyright 45)
    assert checks["copyright", "13"]["lost"][("word", "recording")] == 1
    assert checks["copyright", "45"]["lost"][("word", "Provided")] == 1
    # removing an inline note left empty brackets behind (patents 107A: `importation () of`)
    assert any(f.startswith("empty brackets") for f in checks["patents", "107A"]["leftovers"])
    table = cleaner_check_table(list(checks.values()))
    assert table["Lost words"].iloc[-1] > 20 and table["Leftovers"].iloc[-1] > 0


def _cleaner_blind_to_amendment_notes(text: str) -> str:
    "A note removal that knows no amendment histories, renumbering notes, undated notes or `[Omitted]`."
    text = cleaning.remove_bracket_notes(cleaning.remove_parenthesised_notes(text))
    for rx in (cleaning._INLINE_NOTE, cleaning._STARS):
        text = rx.sub(cleaning._GONE, text)
    return cleaning.tidy_removed_notes(text)


def test_the_check_catches_the_amendment_note_forms(monkeypatch):
    monkeypatch.setattr(cleaning, "remove_editorial_notes", _cleaner_blind_to_amendment_notes)
    checks = {
        (r["act"], r["section"], r["form"][:40]): check_section(r)
        for r in FORMS
        if r["form"].startswith("amendment note")
    }
    assert len(checks) == 6
    missed = [k for k, c in checks.items() if not c["leftovers"]]
    # only the bracketed `[Inserted by …]` was removed before (as a bracket note); every other new form stays and is caught
    assert [k[:2] for k in missed] == [("gi", "59")], missed
    table = cleaner_check_table(list(checks.values()))
    assert table["Leftovers"].iloc[-1] > 20


def test_the_check_catches_a_cleaner_that_drops_bracket_contents(monkeypatch, capsys):
    path = statutes_jsonl_paths()[0]
    monkeypatch.setattr(cleaning, "unwrap_amendment_brackets", lambda text: re.sub(r"\d{0,2}\s?\[[^\]]*\]", "", text))
    assert cli.main(["cleaner-check", str(path), "--show", "3"]) == 1
    out = capsys.readouterr().out
    total = next(line for line in out.splitlines() if line.strip().startswith("Total")).split()
    assert int(total[1]) == len(read_sections_jsonl(path)) and int(total[3]) > 100 and "FAILED" in out


def test_cleaner_check_is_clean_on_every_section_the_project_holds(capsys):
    sources = corpus.project_statute_sources()
    assert {"sections.jsonl", "sections-batch2.jsonl"} <= {p.name for p in sources}
    assert cli.main(["cleaner-check"]) == 0
    out = capsys.readouterr().out
    totals = [line.split() for line in out.splitlines() if line.strip().startswith("Total")]
    assert [int(t[1]) for t in totals] == [len(corpus.read_statute_source(p)) for p in sources]
    assert all(t[2:] == ["0"] * 6 for t in totals)
    assert "0 leftovers and 0 lost statutory words" in out


def test_contexts_are_stable_and_lose_nothing(statute_sections):
    a, b = build_contexts(statute_sections), build_contexts(list(statute_sections))
    assert a == b
    for sec in (clean_section(r) for r in statute_sections):
        joined = " ".join(c["context"] for c in a if (c["act"], c["section"]) == (sec["act"], sec["section"]))
        assert joined == " ".join(sec["units"]) and re.sub(r"\W", "", joined)


# ---------------------------------------------------------------- India Code PDFs

HAS_PDF_TOOLS = all(importlib.util.find_spec(m) for m in ("fpdf", "pypdf"))
if HAS_PDF_TOOLS:
    from standins.india_code_pdf import UNTITLED_HEADING, act_sections, context_targets, section_order, typeset_acts  # noqa: E402


def printed_order(records: list[dict], act: str) -> list[dict]:
    "The records of `act` in the order its PDF prints them (natural section order), whatever batch each came from."
    return sorted((r for r in records if r["act"] == act), key=lambda r: section_order(r["section"]))


pdf_test = pytest.mark.skipif(
    not HAS_PDF_TOOLS, reason="the India Code typesetter needs fpdf2 and pypdf (dev dependencies)"
)


@pytest.fixture(scope="module")
def typeset(statute_sections, tmp_path_factory):
    folder = tmp_path_factory.mktemp("india_code")
    return folder, typeset_acts(statute_sections, folder)


def _page_body(page: str, head: str) -> list[str]:
    return [line for line in page.splitlines() if line.strip() and line.strip() != head]


@pdf_test
@pytest.mark.parametrize("act", list(ACTS))
def test_typeset_pdf_is_in_the_india_code_layout(typeset, act):
    folder, expected = typeset
    pages = read_pdf_pages(folder / f"{act}.pdf")
    head = f"THE {ACTS[act].title.removeprefix('The ').upper()}"
    assert is_toc_page(pages[0]) and not any(is_toc_page(p) for p in pages[1:])
    assert "ARRANGEMENT OF SECTIONS" in pages[0] and "BE it enacted by Parliament" in pages[1]
    body = pages[2:]
    assert body and all(p.splitlines()[0] == head for p in body)  # running heads
    assert all(re.fullmatch(r"\d{1,3}", p.rstrip().splitlines()[-1]) for p in pages[1:])  # page numbers
    text = "\n".join(pages)
    assert re.search(r"^1\. (?:Subs|Ins)\. by ", text, re.M) and re.search(r"^\d\. Omitted by Act", text, re.M)
    assert (
        re.search(r"[a-z]{3}\d ", text) and re.search(r"\d\[", text) and re.search(r"\d\*\*\*", text)
    )  # glued markers
    # some section runs on over a page break: a page's body opens with no section heading or chapter line
    assert any(not re.match(r"(?:\d+[A-Z]*\. [A-Z]|CHAPTER)", _page_body(p, head)[0]) for p in body)


@pdf_test
@pytest.mark.parametrize("act", list(ACTS))
def test_reading_a_typeset_pdf_gives_back_every_section_and_its_cleaned_text(typeset, statute_sections, act):
    folder, expected = typeset
    records = read_statute_pdf(folder / f"{act}.pdf", act, source_url=f"https://example.org/{act}.pdf")
    jsonl = [clean_section(r) for r in printed_order(statute_sections, act)]
    got = [clean_section(r) for r in records]
    assert [s["section"] for s in got] == [s["section"] for s in jsonl]
    for g, want in zip(got, jsonl):
        assert g["title"] == (want["title"] if ": " in want["title"] else f"{want['title']}: {UNTITLED_HEADING}")
        assert g["units"] == want["units"], g["section"]  # no footnote, head or page number leaks; no word lost
        assert all(editorial_leftovers(u) == [] for u in g["units"])
    from_pdf = build_contexts(records)
    assert [c["context"] for c in from_pdf] == [
        c["context"] for c in build_contexts(printed_order(statute_sections, act))
    ]
    text = " ".join(c["context"] for c in from_pdf)
    for noise in (
        "Subs. by",
        "Ins. by",
        "Omitted by",
        "w.e.f.",
        "ARRANGEMENT",
        "CHAPTER",
        "BE it enacted",
        "ACT NO.",
        "*",
        "[",
        "]",
    ):
        assert noise not in text
    assert all(not check_section(r)["leftovers"] and not check_section(r)["lost"] for r in records)


@pdf_test
def test_repeated_sections_reach_a_target_size_with_varied_numbering(statute_sections, tmp_path):
    gi = [r for r in statute_sections if r["act"] == "gi"]
    targets = context_targets(statute_sections, 1173)
    assert set(targets) == set(ACTS) and abs(sum(targets.values()) - 1173) <= len(ACTS)
    want = act_sections(gi, "gi", 30)
    assert sum(len(section_contexts(s)) for s in want) >= 30 and any(
        re.search(r"\d[A-Z]$", s["section"]) for s in want[len(gi) :]
    )
    typeset_acts(gi, tmp_path, target_contexts=30)
    got = [clean_section(r) for r in read_statute_pdf(tmp_path / "gi.pdf", "gi")]
    assert [(s["section"], s["title"], s["units"]) for s in got] == [
        (s["section"], s["title"], s["units"]) for s in want
    ]


@pdf_test
def test_read_official_pdfs_reads_a_folder_and_names_missing_files(typeset, statute_sections):
    folder, _ = typeset
    records = read_official_pdfs(folder, ["gi"])
    assert [r["section"] for r in records] == [r["section"] for r in printed_order(statute_sections, "gi")]
    with pytest.raises(FileNotFoundError, match=r"patents\.pdf"):
        read_official_pdfs(folder / "missing", ["gi", "patents"])
