"""India Code typesetter: PDFs of the seven Acts in the layout of the official India Code PDFs, built
from the statute text the project holds, to rehearse the `paper` profile's PDF path
without the official files.

`typeset_act(sections, path)` lays out one Act: *Arrangement of Sections* pages (chapter lines and
`N. Heading.` lines over as many pages as they need), the Act's title page (title, Act number, date
of assent, long title, enacting formula, CHAPTER I), then the sections in one flow: a running head
and a page number on every page, chapter headings, `N. Heading.—` section headings, sub-sections,
clauses and sub-clauses indented, provisos and Explanations on lines of their own, sections broken
across pages, and the amendment apparatus: footnote markers glued to a word (`registration1`), to an
opening bracket (`2[words]`) or to omission stars (`3***`), each matching a line
`1. Subs. by Act … (w.e.f. …).`, `2. Ins. by …`, `3. Omitted by …`, `4. Subs. by s. 9, ibid., …` in
the footnote block at the foot of the page that carries the marker (numbered per page, as India
Code does). The body is the *cleaned* section text (`indicipr.build.cleaning.clean_section`), so reading the
PDF back with `indicipr.build.statutes.read_statute_pdf` and cleaning it must give exactly that text.

`typeset_acts(records, folder, target_contexts=None)` writes `<folder>/<act>.pdf` for every Act in
`records` (raw section records, e.g. `data/sample/statutes/sections.jsonl`) and returns the expected
cleaned sections per Act. With `target_contexts`, each Act's sections are repeated with varied
numbering (…, 157, 158, 158A, 159, …) until the Acts together give about that many paragraph-level
contexts; the card's corpus has 1,173 contexts over the seven Acts, so `target_contexts=1173`
rehearses a rebuild at full size:

    python -m tests.standins.india_code_pdf OUT_DIR [--target-contexts 1173]

Title-page facts (Act number, date of assent, long title) are given for the layout only; sections
whose source page shows no heading get the heading `UNTITLED_HEADING` (India Code always prints one).
"""

from __future__ import annotations

import argparse
import random
import re
import sys
from pathlib import Path

from fpdf import FPDF

from indicipr.build.cleaning import clean_section, section_title
from indicipr.data.core import ACTS
from indicipr.build.corpus import build_contexts, section_contexts
from indicipr.build.sections import read_sections_jsonl

FRONT_MATTER = {  # act -> (Act number line, date of assent, long title)
    "patents": (
        "ACT NO. 39 OF 1970",
        "[19th September, 1970.]",
        "An Act to amend and consolidate the law relating to patents.",
    ),
    "trademarks": (
        "ACT NO. 47 OF 1999",
        "[30th December, 1999.]",
        "An Act to amend and consolidate the law relating to trade marks, "
        "to provide for registration and better protection of trade marks for goods and services and for the "
        "prevention of the use of fraudulent marks.",
    ),
    "copyright": (
        "ACT NO. 14 OF 1957",
        "[4th June, 1957.]",
        "An Act to amend and consolidate the law relating to copyright.",
    ),
    "designs": (
        "ACT NO. 16 OF 2000",
        "[25th May, 2000.]",
        "An Act to consolidate and amend the law relating to protection of designs.",
    ),
    "gi": (
        "ACT NO. 48 OF 1999",
        "[30th December, 1999.]",
        "An Act to provide for the registration and better protection of geographical indications relating to goods.",
    ),
    "semiconductor": (
        "ACT NO. 37 OF 2000",
        "[4th September, 2000.]",
        "An Act to provide for the protection of semiconductor "
        "integrated circuits layout-designs and for matters connected therewith or incidental thereto.",
    ),
    "plant_varieties": (
        "ACT NO. 53 OF 2001",
        "[30th October, 2001.]",
        "An Act to provide for the establishment of an effective "
        "system for protection of plant varieties, the rights of farmers and plant breeders and to encourage "
        "the development of new varieties of plants.",
    ),
}
CHAPTER_TITLES = [
    "PRELIMINARY",
    "REGISTRATION",
    "RIGHTS AND CONDITIONS",
    "PROCEDURE",
    "OFFENCES AND PENALTIES",
    "MISCELLANEOUS",
]
UNTITLED_HEADING = "Heading not shown in the source"
SECTIONS_PER_CHAPTER = 5
ROMAN = [
    "I",
    "II",
    "III",
    "IV",
    "V",
    "VI",
    "VII",
    "VIII",
    "IX",
    "X",
    "XI",
    "XII",
    "XIII",
    "XIV",
    "XV",
    "XVI",
    "XVII",
    "XVIII",
    "XIX",
    "XX",
    "XXI",
    "XXII",
    "XXIII",
    "XXIV",
    "XXV",
    "XXVI",
    "XXVII",
    "XXVIII",
    "XXIX",
    "XXX",
]

BODY_PT, BODY_LH = 10, 5.0  # font size (pt) and line height (mm) of the body
NOTE_PT, NOTE_LH = 8, 3.8  # and of the footnotes
MARK = re.compile(r"\x01(\d+)\x02")  # a footnote marker placeholder: \x01<footnote id>\x02


def _fonts() -> tuple[Path, Path]:
    import matplotlib

    folder = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    return folder / "DejaVuSans.ttf", folder / "DejaVuSans-Bold.ttf"


# ---------------------------------------------------------------- the sections to typeset


def heading_of(sec: dict) -> str:
    "The heading printed after `N.`: the cleaned title's heading, or `UNTITLED_HEADING` when the source shows none."
    heading = sec["title"].split(": ", 1)[1] if ": " in sec["title"] else UNTITLED_HEADING
    return heading.rstrip(".")  # India Code: `65. Suit for infringement, etc.—`


def _renumbered(sec: dict, number: str) -> dict:
    heading = heading_of(sec)
    return {**sec, "section": number, "title": section_title(number, heading)}


def _next_number(last: str, k: int) -> str:
    "Varied numbering after `last`: mostly the next integer, every third copy an inserted section (`158A`)."
    m = re.fullmatch(r"(\d+)([A-Z]*)", last)
    n, suffix = int(m.group(1)), m.group(2)
    if k % 3 == 2:
        return f"{n}{chr(ord(suffix[-1]) + 1) if suffix else 'A'}"
    return str(n + 1)


def section_order(section: str) -> tuple[int, str]:
    "Natural order of section numbers (2 < 11 < 11A < 107): the order an Act prints them in, whatever batch a record came from."
    m = re.match(r"(\d+)(.*)", section)
    return (int(m.group(1)), m.group(2))


def act_sections(records: list[dict], act: str, n_contexts: int | None = None) -> list[dict]:
    """The cleaned sections of `act` to typeset (an untitled one gets `UNTITLED_HEADING`), repeated with
    varied numbering until they give at least `n_contexts` contexts (no repetition when None)."""
    base = sorted(
        (clean_section(r) for r in records if r["act"] == act), key=lambda s: section_order(s["section"])
    )  # an Act prints them in order
    out = [_renumbered(s, s["section"]) if ": " not in s["title"] else s for s in base]
    count = sum(len(section_contexts(s)) for s in out)
    k = 0
    while n_contexts and count < n_contexts:
        copy = _renumbered(base[k % len(base)], _next_number(out[-1]["section"], k))
        if int(re.match(r"\d+", copy["section"]).group()) > 999:
            raise ValueError(f"{act}: more than 999 sections needed for {n_contexts} contexts")
        out.append(copy)
        count += len(section_contexts(copy))
        k += 1
    return out


def context_targets(records: list[dict], target_contexts: int) -> dict[str, int]:
    "Per-Act context targets summing to `target_contexts`, in proportion to each Act's contexts in `records`."
    have = {
        a: len([c for c in build_contexts(r for r in records if r["act"] == a)])
        for a in ACTS
        if any(r["act"] == a for r in records)
    }
    total = sum(have.values())
    return {a: max(n, round(target_contexts * n / total)) for a, n in have.items()}


# ---------------------------------------------------------------- amendment apparatus


def _wef(rng: random.Random) -> str:
    return (
        f"(w.e.f. {rng.randint(1, 28)}-{rng.randint(1, 12)}-{rng.choice([1984, 1995, 2003, 2005, 2010, 2013, 2021])})"
    )


def annotate(units: list[str], rng: random.Random, footnotes: list[str]) -> list[str]:
    """Put 1 to 3 India Code amendment markers into a section's units (`\\x01id\\x02` placeholders; `footnotes[id]`
    is the footnote's text): a word glued to its number, words in a numbered bracket, or numbered omission stars."""
    units = list(units)
    for _ in range(rng.randint(1, 3)):
        u = rng.randrange(len(units))
        words = units[u].split(" ")
        if len(words) < 8:
            continue
        fid, kind = len(footnotes), rng.choice(["glued", "bracket", "bracket", "stars"])
        mark = f"\x01{fid}\x02"
        act_no = (
            f"Act {rng.choice([13, 23, 27, 33, 38, 40])} of {rng.choice([1983, 1992, 1994, 2005, 2010, 2012, 2021])}"
        )
        if kind == "glued":
            plain = [i for i, w in enumerate(words[1:], 1) if re.fullmatch(r"[a-z]{3,}", w)]
            if not plain:
                continue
            i = rng.choice(plain)
            words[i] += mark
            footnotes.append(f"Ins. by {act_no}, s. {rng.randint(2, 60)} {_wef(rng)}.")
        elif kind == "bracket":
            i = rng.randrange(1, len(words) - 5)
            j = i + rng.randint(1, 4)
            old = " ".join(re.sub(r"\W", "", w) for w in words[i : j + 1][:2])
            words[i], words[j] = mark + "[" + words[i], words[j] + "]"
            ibid = footnotes and rng.random() < 0.3
            footnotes.append(
                f'Subs. by s. {rng.randint(2, 60)}, ibid., for "{old}" {_wef(rng)}.'
                if ibid
                else f'Subs. by {act_no}, s. {rng.randint(2, 60)}, for "{old}" {_wef(rng)}.'
            )
        else:
            i = rng.randrange(1, len(words))
            words.insert(i, mark + "***")
            footnotes.append(f"Omitted by {act_no}, s. {rng.randint(2, 60)} {_wef(rng)}.")
        units[u] = " ".join(words)
    return units


_LABEL_AHEAD = r"(?=\((?:[a-z]{1,2}|[ivx]{1,5}|[A-Z]{1,2})\) )"
_BREAK = re.compile(
    rf"(?:(?<=[;:—–])|(?<=[;:] and)|(?<=[;:] or)|(?<=; and/or)) {_LABEL_AHEAD}"
    r"|(?<=[.:;—–]) (?=Provided(?: further)? that\b)|(?<=[.:;—–]) (?=Explanation\b)"
)


def paragraphs(sec: dict, units: list[str]) -> list[tuple[str, float, bool]]:
    """`(text, indent in mm, keep with next)` for a section: `N. Heading.—` with its first unit, then the others;
    clauses `(a)`, sub-clauses `(i)`, provisos and Explanations on lines of their own (cut only at spaces)."""
    out = []
    for k, unit in enumerate(units):
        text = f"{sec['section']}. {heading_of(sec)}.—{unit}" if k == 0 else unit
        for p, piece in enumerate(_BREAK.split(text)):
            roman = re.match(r"\((?:[ivx]{1,5})\) ", piece) and not re.match(r"\((?:i|v|x)\) ", piece)
            indent = 0 if p == 0 else 14 if roman else 8 if re.match(r"\(", piece) else 4
            out.append((piece, indent, k == 0 and p == 0))
    return out


# ---------------------------------------------------------------- layout


class IndiaCodePDF(FPDF):
    "An A4 page in the India Code manner: running head, body, footnote block below a rule, page number."

    def __init__(self, running_head: str):
        super().__init__(format="A4")
        regular, bold = _fonts()
        self.add_font("DejaVu", "", str(regular))
        self.add_font("DejaVu", "B", str(bold))
        self.set_auto_page_break(False)
        self.set_margins(22, 20, 22)
        self.running_head = running_head
        self._widths: dict[tuple[str, float], float] = {}

    def width(self, text: str, size: float) -> float:
        "Width of `text` in mm (a marker placeholder counts as two digits); cached, the text runs are few."
        key = (text, size)
        if key not in self._widths:
            self.set_font("DejaVu", "", size)
            self._widths[key] = self.get_string_width(MARK.sub("99", text))
        return self._widths[key]

    def wrap(self, text: str, width: float, size: float) -> list[str]:
        "Greedy line breaking at spaces only (never after a hyphen that ends a word)."
        lines, cur, used, space = [], "", 0.0, self.width(" ", size)
        for word in text.split(" "):
            w = self.width(word, size)
            if cur and used + space + w > width and not cur.endswith("-"):
                lines.append(cur)
                cur, used = word, w
            else:
                cur, used = (f"{cur} {word}", used + space + w) if cur else (word, w)
        return lines + [cur] if cur else lines

    def text_line(self, x: float, y: float, text: str, size: float = BODY_PT, style: str = "", align: str = "L"):
        self.set_font("DejaVu", style, size)
        self.set_xy(x, y)
        self.cell(self.epw - (x - self.l_margin), 4, text, align=align)

    def running_head_line(self):
        self.text_line(self.l_margin, 10, self.running_head, 8, align="C")

    def page_number(self):
        self.text_line(self.l_margin, self.h - 12, str(self.page_no()), 9, align="C")


class Flow:
    "Body lines placed page by page; each page's footnotes (numbered 1, 2, … per page) go in a block at its foot."

    def __init__(self, pdf: IndiaCodePDF, footnotes: list[str], top: float):
        self.pdf, self.footnotes = pdf, footnotes
        self.y, self.page_notes = top, []
        self._note_lines: dict[tuple[int, int], list[str]] = {}
        self.bottom = pdf.h - 22

    def note_lines(self, n: int, fid: int) -> list[str]:
        "The lines of footnote `fid` printed as number `n` (cached)."
        if (n, fid) not in self._note_lines:
            self._note_lines[n, fid] = self.pdf.wrap(f"{n}. {self.footnotes[fid]}", self.pdf.epw, NOTE_PT)
        return self._note_lines[n, fid]

    def note_height(self, ids: list[int]) -> float:
        "Height of the footnote block for footnotes `ids` (rule and gap included); 0 without notes."
        if not ids:
            return 0.0
        return 4 + sum(len(self.note_lines(n, i)) for n, i in enumerate(ids, 1)) * NOTE_LH

    def fits(self, lines: list[str]) -> bool:
        ids = self.page_notes + [
            int(i) for lineine_ in lines for i in MARK.findall(lineine_) if int(i) not in self.page_notes
        ]
        return self.y + len(lines) * BODY_LH <= self.bottom - self.note_height(ids)

    def finish_page(self):
        pdf = self.pdf
        if self.page_notes:
            y = self.bottom - self.note_height(self.page_notes) + 2
            pdf.line(pdf.l_margin, y - 1, pdf.l_margin + 40, y - 1)  # India Code's short rule above the notes
            for n, fid in enumerate(self.page_notes, 1):
                for line in self.note_lines(n, fid):
                    pdf.text_line(pdf.l_margin, y, line, NOTE_PT)
                    y += NOTE_LH
        pdf.page_number()
        self.page_notes = []

    def new_page(self):
        self.finish_page()
        self.pdf.add_page()
        self.pdf.running_head_line()  # drawn first: it is the first line of the page's text
        self.y = 20

    def place(self, line: str, indent: float, size: float = BODY_PT, style: str = ""):
        def number(m):
            fid = int(m.group(1))
            if fid not in self.page_notes:
                self.page_notes.append(fid)
            return str(self.page_notes.index(fid) + 1)

        self.pdf.text_line(self.pdf.l_margin + indent, self.y, MARK.sub(number, line), size, style)
        self.y += BODY_LH

    def block(self, lines: list[tuple[str, float, str]], keep: int):
        "Place lines; the first `keep` of them (a heading) are never split from each other by a page break."
        if not self.fits([line_ for line_, _, _ in lines[:keep]]):
            self.new_page()
        for k, (line, indent, style) in enumerate(lines):
            if k >= keep and not self.fits([line]):
                self.new_page()
            self.place(line, indent, style=style)


def toc_pages(pdf: IndiaCodePDF, title: str, sections: list[dict]):
    "The Arrangement of Sections: title, `SECTIONS`, chapter lines and one `N. Heading.` line per section."
    pdf.add_page()
    y = 20
    pdf.text_line(pdf.l_margin, y, title, 11, "B", align="C")
    y += 7
    pdf.text_line(pdf.l_margin, y, "ARRANGEMENT OF SECTIONS", 10, "B", align="C")
    y += 6
    pdf.text_line(pdf.l_margin, y, "SECTIONS", 8)
    y += 5
    for k, sec in enumerate(sections):
        rows = []
        if k % SECTIONS_PER_CHAPTER == 0:
            c = k // SECTIONS_PER_CHAPTER
            rows += [(f"CHAPTER {ROMAN[c % len(ROMAN)]}", 0, "C"), (CHAPTER_TITLES[c % len(CHAPTER_TITLES)], 0, "C")]
        entry = pdf.wrap(f"{sec['section']}. {heading_of(sec)}.".replace("..", "."), pdf.epw - 10, 9)
        rows += [(entry[0], 0, "L")] + [(line, 10, "L") for line in entry[1:]]
        if y + len(rows) * 4.5 > pdf.h - 20:
            pdf.add_page()
            y = 20
        for text, indent, align in rows:
            pdf.text_line(pdf.l_margin + indent, y, text, 9, align=align)
            y += 4.5


def typeset_act(sections: list[dict], path: str | Path, seed: int = 0) -> Path:
    "Write one Act's India Code-style PDF from its cleaned sections (see `act_sections`)."
    act = sections[0]["act"]
    title = ACTS[act].title.removeprefix("The ").upper()
    title = f"THE {title}"
    act_no, assent, long_title = FRONT_MATTER[act]
    pdf = IndiaCodePDF(title)
    toc_pages(pdf, title, sections)
    pdf.add_page()  # the Act's title page, where the body begins
    y = 22
    for text, size, style in [(title, 12, "B"), (act_no, 10, "B"), (assent, 10, "")]:
        pdf.text_line(pdf.l_margin, y, text, size, style, align="C")
        y += 7
    for line in pdf.wrap(long_title, pdf.epw, BODY_PT):
        pdf.text_line(pdf.l_margin, y, line)
        y += BODY_LH
    y += 2
    for line in pdf.wrap("BE it enacted by Parliament as follows:—", pdf.epw, BODY_PT):
        pdf.text_line(pdf.l_margin + 6, y, line)
        y += BODY_LH
    rng, footnotes = random.Random(f"{act}-{seed}"), []
    flow = Flow(pdf, footnotes, y + 3)
    for k, sec in enumerate(sections):
        lines = []
        if k % SECTIONS_PER_CHAPTER == 0:
            c = k // SECTIONS_PER_CHAPTER
            lines += [(f"CHAPTER {ROMAN[c % len(ROMAN)]}", 75, "B"), (CHAPTER_TITLES[c % len(CHAPTER_TITLES)], 70, "B")]
        keep = len(lines) + 2
        for text, indent, _ in paragraphs(sec, annotate(sec["units"], rng, footnotes)):
            wrapped = pdf.wrap(text, pdf.epw - indent - 6, BODY_PT)
            lines += [(wrapped[0], indent + 6, "")] + [(line, indent, "") for line in wrapped[1:]]
        flow.block(lines, keep)
    flow.finish_page()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    pdf.output(str(path))
    return path


def typeset_acts(
    records: list[dict], folder: str | Path, target_contexts: int | None = None, seed: int = 0
) -> dict[str, list[dict]]:
    "Write `<folder>/<act>.pdf` for every Act in `records`; returns act -> the cleaned sections typeset (the expected reading)."
    targets = context_targets(records, target_contexts) if target_contexts else {}
    out = {}
    for act in ACTS:
        if not any(r["act"] == act for r in records):
            continue
        out[act] = act_sections(records, act, targets.get(act))
        typeset_act(out[act], Path(folder) / f"{act}.pdf", seed)
    return out


def main(argv: list[str] | None = None) -> int:
    from indicipr.build.sections import statutes_jsonl_paths

    ap = argparse.ArgumentParser(
        description="Typeset the seven Acts as India Code-style PDFs (a stand-in for the official files)."
    )
    ap.add_argument("out_dir")
    ap.add_argument("--statutes", default=None, help="section JSONL (default: every batch the project holds)")
    ap.add_argument(
        "--target-contexts", type=int, default=None, help="repeat sections until about this many contexts (card: 1173)"
    )
    args = ap.parse_args(argv)
    records = read_sections_jsonl(args.statutes or statutes_jsonl_paths())
    done = typeset_acts(records, args.out_dir, args.target_contexts)
    for act, secs in done.items():
        print(
            f"{act}: {len(secs)} sections, {sum(len(section_contexts(s)) for s in secs)} contexts -> {Path(args.out_dir) / (act + '.pdf')}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
