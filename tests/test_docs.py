"""The docs cannot drift from the code: README.md, DESIGN.md and the pages beside the notebooks (notebooks/*.md).

Every ```python snippet runs (a snippet that needs the hub, a hosted endpoint or a GPU is fenced ```python-online and
is compiled only); every module path, notebook name, `indicipr` subcommand and option, `make` target and relative link
a page names exists. The checks are functions of a checkout's root, so that a test can break a copy and see them fail.
"""

from __future__ import annotations

import argparse
import ast
import re
import shlex
import shutil
import subprocess
import sys
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README_MAX_LINES = 250

_FENCE = re.compile(r"^( *)```([\w-]*)[^\n]*\n(.*?)^\1```", re.S | re.M)
_SPAN = re.compile(r"`([^`\n]+)`")
_MODULE = re.compile(r"\bindicipr(?:\.[A-Za-z_]\w*)+")
_FILE = re.compile(r"(?<![\w./-])((?:indicipr|notebooks|tests|benchmarks|\.ci|jupyter-config)/[\w./*<>-]*\w)")
_NOTEBOOK = re.compile(r"(?<![\w./-])(\d\d[a-z]?_[a-z]+\.[a-z_]+)(?:\.ipynb)?\b")
_COMMAND = re.compile(r"(?:^|(?<=[\s`(/]))indicipr ([a-z][\w-]*)([^`\n|;&#]*)")
_OPTION = re.compile(r"(?<![\w-])(--[a-z][\w-]*)")
_MAKE = re.compile(r"(?<![\w$(])make ([a-z][\w-]*)")
_LINK = re.compile(r"\]\(([^)\s]+)\)")
_QUALIFIED = re.compile(r"(?<![\w./])([a-z_]+)\.([A-Za-z_]\w*)")
_NOT_ATTRIBUTES = {
    "json",
    "jsonl",
    "py",
    "md",
    "csv",
    "tex",
    "png",
    "pdf",
    "ipynb",
    "html",
    "yml",
    "yaml",
    "txt",
    "ini",
}
_NOT_SUBCOMMANDS = {"import"}


def doc_pages(root: Path = ROOT) -> list[Path]:
    "README.md, DESIGN.md and every Markdown page beside the notebooks."
    return [root / "README.md", root / "DESIGN.md", *sorted((root / "notebooks").glob("*.md"))]


def snippets(text: str) -> list[tuple[str, str]]:
    "The fenced blocks of a page: (language, code), the code dedented by its fence's indent."
    out = []
    for m in _FENCE.finditer(text):
        indent = len(m.group(1))
        code = "\n".join(line[indent:] for line in m.group(3).splitlines())
        out.append((m.group(2), code))
    return out


def code_text(text: str) -> list[str]:
    "What a page shows as code: its fenced blocks and its inline code spans."
    blocks = [code for _, code in snippets(text)]
    prose = _FENCE.sub("", text)
    return blocks + _SPAN.findall(prose)


def _top_level_names(path: Path) -> set[str]:
    "The names a module file binds at its top level (definitions, assignments, imports, `__all__`)."
    tree = ast.parse(path.read_text(encoding="utf-8"))
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign)):
            for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                names.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.If):  # `if TYPE_CHECKING:` and the like
            for sub in node.body:
                if isinstance(sub, (ast.Import, ast.ImportFrom)):
                    names.update((a.asname or a.name).split(".")[0] for a in sub.names)
    if "__getattr__" in names:  # the package top serves its `__all__` lazily
        for node in tree.body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                names.update(ast.literal_eval(node.value))
    return names


def _module_file(root: Path, parts: list[str]) -> Path | None:
    base = root.joinpath(*parts)
    if base.with_suffix(".py").is_file():
        return base.with_suffix(".py")
    if (base / "__init__.py").is_file():
        return base / "__init__.py"
    if base.is_dir():  # a package folder without Python (indicipr/lm_eval_tasks/indicipr_qa)
        return base
    return None


def module_path_problem(root: Path, dotted: str) -> str | None:
    "Why `indicipr.x.y[.attr]` names nothing in the checkout at `root` (None when it names a module or its attribute)."
    parts = dotted.split(".")
    for n in range(len(parts), 0, -1):
        found = _module_file(root, parts[:n])
        if found is None:
            continue
        rest = parts[n:]
        if not rest or found.is_dir() or rest[0] in _top_level_names(found):
            return None
        return f"`{dotted}`: {'.'.join(parts[:n])} has no `{rest[0]}`"
    return f"`{dotted}`: no such module"


def _short_modules(root: Path) -> dict[str, list[Path]]:
    "Each module's or floor's last name (`core`, `llm`, `runner`) → its files, for names such as `core.main_job`."
    out: dict[str, list[Path]] = {}
    for p in sorted((root / "indicipr").rglob("*.py")):
        name = p.parent.name if p.name == "__init__.py" else p.stem
        if not name.startswith("_") and name != "indicipr" and p.parent.name != "indicipr_qa":
            out.setdefault(name, []).append(p)
    return out


@cache
def _parser_options() -> dict[str, set[str]]:
    "Each `indicipr` subcommand → every option it and its own subcommands accept (from the real argparse parser)."
    from indicipr.run import cli

    def options(p: argparse.ArgumentParser) -> set[str]:
        found = {s for a in p._actions for s in a.option_strings}
        for a in p._actions:
            if isinstance(a, argparse._SubParsersAction):
                for sub in a.choices.values():
                    found |= options(sub)
        return found

    parser = cli.build_parser()
    (subs,) = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    top = {s for a in parser._actions for s in a.option_strings}
    return {name: options(sub) | top for name, sub in subs.choices.items()}


def _ignored(root: Path, path: str) -> bool:
    "Whether `path` lies under a folder `.gitignore` names (an output such as `benchmarks/out/`, absent in a clone)."
    lines = (root / ".gitignore").read_text().splitlines() if (root / ".gitignore").is_file() else []
    folders = [line.strip("/") for line in lines if line.endswith("/") and not line.startswith("#")]
    return any(path == f or path.startswith(f + "/") for f in folders)


def _make_targets(root: Path) -> set[str]:
    text = (root / "Makefile").read_text()
    return {t for line in re.findall(r"^([\w .-]+):(?!=)", text, re.M) for t in line.split()}


def reference_problems(page: Path, root: Path = ROOT) -> list[str]:
    "Every name `page` gives that the checkout at `root` lacks: one line each, naming the page."
    text = page.read_text(encoding="utf-8")
    code = code_text(text)
    problems = []
    for chunk in code:
        for dotted in _MODULE.findall(chunk):
            problems.append(module_path_problem(root, dotted))
        for path in _FILE.findall(chunk):
            if not any(c in path for c in "<>*…") and not (root / path).exists() and not _ignored(root, path):
                problems.append(f"`{path}`: no such file")
        for name in _NOTEBOOK.findall(chunk):
            if not (root / "notebooks" / f"{name}.ipynb").is_file():
                problems.append(f"`{name}`: no such notebook")
        for sub, rest in _COMMAND.findall(chunk):
            if sub in _NOT_SUBCOMMANDS:
                continue
            commands = _parser_options()
            if sub not in commands:
                problems.append(f"`indicipr {sub}`: no such subcommand")
                continue
            problems += [
                f"`indicipr {sub} {o}`: no such option" for o in _OPTION.findall(rest) if o not in commands[sub]
            ]
        problems += [f"`make {t}`: no such target" for t in _MAKE.findall(chunk) if t not in _make_targets(root)]
        modules = _short_modules(root)
        for short, attr in _QUALIFIED.findall(chunk):
            if short in modules and attr not in _NOT_ATTRIBUTES:
                if not any(attr in _top_level_names(p) or (p.parent / f"{attr}.py").is_file() for p in modules[short]):
                    problems.append(f"`{short}.{attr}`: no module `{short}` has `{attr}`")
    for target in _LINK.findall(_FENCE.sub("", text)):
        path = target.split("#", 1)[0]
        if path and not re.match(r"[a-z]+:", path) and not (page.parent / path).exists():
            problems.append(f"link `{target}`: no such file")
    return [f"{page.relative_to(root)}: {p}" for p in problems if p]


def snippet_problems(page: Path, cwd: Path = ROOT) -> list[str]:
    """Run every ```python snippet of `page` (in a fresh interpreter, in `cwd`); compile every ```python-online one.
    One line per snippet that fails."""
    problems = []
    for i, (lang, code) in enumerate(snippets(page.read_text(encoding="utf-8")), 1):
        if lang == "python-online":
            try:
                compile(code, f"{page.name} snippet {i}", "exec")
            except SyntaxError as e:
                problems.append(f"{page.name} snippet {i}: {e}")
        elif lang == "python":
            out = subprocess.run([sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=300)
            if out.returncode:
                problems.append(f"{page.name} snippet {i}: exit {out.returncode}: {out.stderr.strip()[-600:]}")
    return problems


_LM_EVAL = re.compile(r"(?m)^[ \t]*lm_eval\b(?:[^\n\\]|\\\n)*")


def _shipped_lm_eval_names(root: Path) -> set[str]:
    "The tasks and tags of the package's lm-evaluation-harness folder."
    texts = [p.read_text(encoding="utf-8") for p in (root / "indicipr" / "lm_eval_tasks").rglob("*.yaml")]
    return {name for t in texts for name in re.findall(r"(?m)^(?:task|tag): *(\S+)", t)}


def lm_eval_problems(page: Path, root: Path = ROOT) -> list[str]:
    """Each `lm_eval` command `page` shows that leaves `indicipr evaluate --pred` nothing to score (lm-eval writes the
    samples file only with `--log_samples` and an `--output_path`), or that names a task the package does not ship."""
    shipped = _shipped_lm_eval_names(root)
    problems = []
    for _, code in snippets(page.read_text(encoding="utf-8")):
        for m in _LM_EVAL.finditer(code):
            words = shlex.split(m.group(0).replace("\\\n", " "))
            command = " ".join(words[:3]) + " …"
            missing = [flag for flag in ("--log_samples", "--output_path") if flag not in words]
            if missing:
                problems.append(f"`{command}`: no {' '.join(missing)}, so no samples file for `indicipr evaluate`")
            tasks = words[words.index("--tasks") + 1].split(",") if "--tasks" in words[:-1] else []
            problems += [
                f"`{command}`: no task or tag {t}" for t in tasks if not t.startswith("$") and t not in shipped
            ]
    return [f"{page.relative_to(root)}: {p}" for p in problems]


def test_every_lm_eval_command_writes_the_samples_indicipr_scores(tmp_path):
    "The lm-eval commands of the pages, the offline one with SmolLM2 among them, end in a file `evaluate --pred` reads."
    pages = [p for p in doc_pages() if _LM_EVAL.search(p.read_text(encoding="utf-8"))]
    assert ROOT / "notebooks" / "scoring.md" in pages
    assert sum(len(_LM_EVAL.findall(p.read_text(encoding="utf-8"))) for p in pages) >= 2
    assert [p for page in pages for p in lm_eval_problems(page)] == []
    broken = ROOT.joinpath("notebooks", "scoring.md").read_text(encoding="utf-8").replace(" --log_samples", "")
    (tmp_path / "indicipr").symlink_to(ROOT / "indicipr")
    (page := tmp_path / "notebooks" / "scoring.md").parent.mkdir()
    page.write_text(broken.replace("--tasks indicipr_qa_llamacpp", "--tasks indicipr_qa_llama"), encoding="utf-8")
    found = lm_eval_problems(page, tmp_path)
    assert len(found) == 3, found  # each command without --log_samples, and the misspelt tag
    assert "notebooks/scoring.md: `lm_eval --model local-chat-completions …`: no --log_samples" in found[0], found
    assert found[-1].endswith("no task or tag indicipr_qa_llama"), found


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_every_name_a_page_gives_exists(page):
    assert reference_problems(page) == []


@pytest.mark.parametrize("page", doc_pages(), ids=lambda p: p.name)
def test_every_python_snippet_runs(page):
    assert snippet_problems(page) == []


def test_the_pages_hold_snippets_and_names_to_check():
    "The checks see something: the README's Python snippet, and names of every kind across the pages."
    texts = [p.read_text() for p in doc_pages()]
    assert [lang for lang, _ in snippets(texts[0])].count("python") >= 1
    code = [c for t in texts for c in code_text(t)]
    for pattern in (_MODULE, _FILE, _NOTEBOOK, _COMMAND, _MAKE, _OPTION):
        assert any(pattern.search(c) for c in code), pattern.pattern
    assert any(_LINK.search(t) for t in texts)


def test_the_readme_is_a_front_page():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) < README_MAX_LINES, len(lines)


def test_the_readme_maps_every_notebook_in_reading_order():
    text = (ROOT / "README.md").read_text()
    mapped = re.findall(r"^\| \[`([\w.]+)`\]\(notebooks/\1\.ipynb\)", text, re.M)
    assert mapped == sorted(p.stem for p in (ROOT / "notebooks").glob("*.ipynb"))


def _copy_docs(tmp_path: Path) -> Path:
    "The pages, the Makefile, indicipr/ and the notebooks' names in a temporary checkout."
    root = tmp_path / "repo"
    shutil.copytree(ROOT / "indicipr", root / "indicipr", ignore=shutil.ignore_patterns("__pycache__"))
    (root / "notebooks").mkdir()
    for p in (ROOT / "notebooks").iterdir():
        shutil.copy(p, root / "notebooks" / p.name)
    for name in ("README.md", "DESIGN.md", "Makefile", ".gitignore"):
        shutil.copy(ROOT / name, root / name)
    for folder in ("tests", "benchmarks", ".ci", "jupyter-config", "figures", "data"):
        (root / folder).symlink_to(ROOT / folder)
    return root


def test_a_renamed_notebook_module_or_target_is_reported(tmp_path):
    "The checks are real: a copy of the checkout passes them, and each break of it is named on the right page."
    root = _copy_docs(tmp_path)
    before = {p for page in doc_pages(root) for p in reference_problems(page, root)}
    assert before == {p for page in doc_pages() for p in reference_problems(page)}  # the copy reads as the checkout

    (root / "notebooks" / "07c_systems.boundary.ipynb").rename(root / "notebooks" / "07c_systems.edges.ipynb")
    (root / "indicipr" / "systems" / "boundary.py").rename(root / "indicipr" / "systems" / "edges.py")
    design = root / "DESIGN.md"
    design.write_text(design.read_text().replace("indicipr.data.benchmark", "indicipr.data.benchmarks"))
    running = root / "notebooks" / "running.md"
    running.write_text(running.read_text() + "\nRun `make rehearsal`, then `indicipr doctor --fast`.\n")
    readme = root / "README.md"
    readme.write_text(readme.read_text() + "\nSee [the guide](notebooks/guide.md).\n")
    found = "\n".join(p for page in doc_pages(root) for p in reference_problems(page, root) if p not in before)
    assert "README.md: `07c_systems.boundary`: no such notebook" in found, found
    assert "README.md: link `notebooks/07c_systems.boundary.ipynb`: no such file" in found, found
    assert "notebooks/beyond.md: `indicipr.systems.boundary`: indicipr.systems has no `boundary`" in found, found
    assert "DESIGN.md: `indicipr.data.benchmarks`: indicipr.data has no `benchmarks`" in found, found
    assert "notebooks/running.md: `make rehearsal`: no such target" in found, found
    assert "notebooks/running.md: `indicipr doctor --fast`: no such option" in found, found
    assert "README.md: link `notebooks/guide.md`: no such file" in found, found


def test_a_failing_snippet_is_reported(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nfrom indicipr import load_benchmark\nassert callable(load_benchmark)\n```\n\n"
        "```python\nfrom indicipr import load_benchmarks\n```\n\n```python-online\nds = load_benchmark('hub'\n```\n"
    )
    found = snippet_problems(page)
    assert len(found) == 2 and "snippet 2" in found[0] and "load_benchmarks" in found[0], found
    assert "snippet 3" in found[1], found
