"""PDF round trip for the corpus stage (indicipr.corpus).

Real sections of the GI Act (from the section JSONL) are cleaned by the JSONL path, then laid out
India Code style in a PDF (fpdf2): an *Arrangement of Sections* page, the Act's title and
preamble, chapter headings, `N. Heading.—` section headings, amendment markers `1[...]` with
their footnotes at the foot of the page, wrapped lines and page numbers. Reading the PDF back
with `read_statute_pdf` (pypdf) and cleaning it must give exactly the same contexts.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

fpdf = pytest.importorskip("fpdf")
pytest.importorskip("pypdf")

from indicipr.corpus import (build_contexts, clean_section, read_official_pdfs, read_sections_jsonl,
                             read_statute_pdf, statutes_jsonl_path, is_toc_page, read_pdf_pages)

ACT = "gi"


def _font() -> Path:
    import matplotlib
    return Path(matplotlib.get_data_path()) / "fonts" / "ttf" / "DejaVuSans.ttf"


@pytest.fixture(scope="module")
def gi_sections():
    return [r for r in read_sections_jsonl(statutes_jsonl_path()) if r["act"] == ACT]


def _mark_amendment(text: str, n: int) -> tuple[str, str]:
    "Wrap the 3rd to 6th words of `text` in an India Code amendment marker `n[...]`; return text and footnote."
    words = text.split(" ")
    words[2] = f"{n}[{words[2]}"
    words[5] = f"{words[5]}]"
    return " ".join(words), f"{n}. Subs. by Act 15 of 2005, s. {n}, for certain words (w.e.f. 1-1-2006)."


def render_act_pdf(sections: list[dict], path: Path) -> Path:
    "Lay cleaned sections out like an India Code PDF (TOC, preamble, chapters, markers, footnotes, page numbers)."
    cleaned = [clean_section(r) for r in sections]
    pdf = fpdf.FPDF(format="A4")
    pdf.set_auto_page_break(False)
    pdf.add_font("DejaVu", "", str(_font()))
    pdf.set_font("DejaVu", size=9)
    width = pdf.epw

    def page_number():
        pdf.set_xy(pdf.l_margin, pdf.h - 12)
        pdf.cell(width, 5, str(pdf.page_no()), align="C")

    pdf.add_page()  # table of contents
    pdf.multi_cell(width, 5, "ARRANGEMENT OF SECTIONS\nCHAPTER I\nPRELIMINARY\nSECTIONS\n" +
                   "\n".join(f"{c['section']}. {c['title'].split(': ', 1)[1]}." for c in cleaned))
    page_number()
    pdf.add_page()  # the Act's title and preamble
    pdf.multi_cell(width, 5, "THE GEOGRAPHICAL INDICATIONS OF GOODS (REGISTRATION AND PROTECTION) ACT, 1999\n"
                   "ACT NO. 48 OF 1999\n[30th December, 1999.]\nAn Act to provide for the registration and better "
                   "protection of geographical indications relating to goods.\nBE it enacted by Parliament as follows:—")
    page_number()
    for i, c in enumerate(cleaned, 1):
        pdf.add_page()
        if i % 3 == 1: pdf.multi_cell(width, 5, f"CHAPTER {'I' * ((i + 2) // 3)}\nREGISTRATION AND PROTECTION")
        first, footnote = _mark_amendment(c["units"][0], 1)
        heading = c["title"].split(": ", 1)[1].rstrip(".")
        body = f"{c['section']}. {heading}.—{first}" + "".join("\n" + u for u in c["units"][1:])
        pdf.multi_cell(width, 5, body)
        pdf.set_xy(pdf.l_margin, pdf.h - 30)
        pdf.multi_cell(width, 4, "______________\n" + footnote)
        page_number()
    pdf.output(str(path))
    return path


def test_pdf_round_trip_gives_the_jsonl_contexts(gi_sections, tmp_path):
    pdf_path = render_act_pdf(gi_sections, tmp_path / f"{ACT}.pdf")
    pages = read_pdf_pages(pdf_path)
    assert is_toc_page(pages[0]) and not any(is_toc_page(p) for p in pages[2:])
    assert any("Subs. by Act 15 of 2005" in p for p in pages)            # the noise is really in the PDF
    assert sum("\n" in p for p in pages) == len(pages)                     # and so are hard line breaks
    records = read_statute_pdf(pdf_path, ACT, source_url="https://example.org/gi.pdf")
    assert [r["section"] for r in records] == [r["section"] for r in gi_sections]
    from_pdf = build_contexts(records)
    expected = build_contexts(gi_sections)
    assert [c["context_id"] for c in from_pdf] == [c["context_id"] for c in expected]
    assert [c["title"] for c in from_pdf] == [c["title"] for c in expected]
    for got, want in zip(from_pdf, expected):
        assert got["context"] == want["context"], got["context_id"]
    text = " ".join(c["context"] for c in from_pdf)
    for noise in ("Subs. by", "w.e.f.", "ARRANGEMENT", "CHAPTER", "BE it enacted", "[", "]", "______"):
        assert noise not in text


def test_read_official_pdfs_reads_a_folder_and_names_missing_files(gi_sections, tmp_path):
    render_act_pdf(gi_sections[:3], tmp_path / f"{ACT}.pdf")
    records = read_official_pdfs(tmp_path, [ACT])
    assert [r["section"] for r in records] == [r["section"] for r in gi_sections[:3]]
    with pytest.raises(FileNotFoundError, match=r"patents\.pdf"):
        read_official_pdfs(tmp_path, [ACT, "patents"])


def test_contexts_are_stable_and_lose_nothing(gi_sections):
    a, b = build_contexts(gi_sections), build_contexts(list(gi_sections))
    assert a == b
    for sec in (clean_section(r) for r in gi_sections):
        joined = " ".join(c["context"] for c in a if c["section"] == sec["section"])
        assert joined == " ".join(sec["units"])
        assert re.sub(r"\W", "", joined)  # nothing empty
