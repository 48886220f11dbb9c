"""Helpers shared by the test files (plain functions and constants; the pytest fixtures are in conftest.py).

Paths are the checkout's own, fixed at import: some tests move the project root (`INDICIPR_ROOT`, the `root`
fixture) and still need the committed fixtures and recordings."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from indicipr.data import core, qa_files
from indicipr.run import runner

ROOT = Path(__file__).resolve().parents[1]  # the checkout
BIN = Path(sys.executable).parent  # the virtualenv's console scripts (indicipr, nbdev_*)
QA_SMALL = ROOT / "tests" / "fixtures" / "qa_small"  # official-format files cut from real statute text
SHARED = core.shared_dir()  # ../shared beside the checkout (or None), before any root move


# ---------------------------------------------------------------- committed data
def read_qa_small(split: str = "test") -> list[dict]:
    "The records of one official file of the qa_small fixture (`train`, `validation`, `test`, `merged`), validated."
    return qa_files.load_qa_file(QA_SMALL / core.OFFICIAL_FILES[split], strict=True).records


def read_qa_small_all() -> dict[str, list[dict]]:
    "Every official file of the qa_small fixture: `{split: records}`."
    return {split: read_qa_small(split) for split in core.OFFICIAL_FILES}


def recorded_generations() -> list[dict]:
    "The recorded generation replies the sample is rebuilt from, every batch: the committed copies, else ../shared/sample."
    from indicipr.build.sections import batch_files

    local = ROOT / "data" / "sample" / "recorded"
    files = batch_files(local, "generations") if local.is_dir() else []
    if not files and SHARED is not None:
        files = batch_files(SHARED / "sample", "generations")
    if not files:
        pytest.fail(
            f"no recorded generations: neither {local}/generations.jsonl nor ../shared/sample/generations.jsonl exists"
        )
    return [r for f in files for r in qa_files.read_jsonl(f)]


def recorded_candidates() -> list[dict]:
    "The recorded replies parsed the way 02_build.generate writes candidates."
    out = []
    for r in recorded_generations():
        for n, it in enumerate(json.loads(r["response"])["items"], 1):
            out.append(
                {
                    "candidate_id": f"{r['context_id']}_q{n}",
                    "context_id": r["context_id"],
                    "act": r["act"],
                    "section": r["section"],
                    "title": r["title"],
                    "context": r["context"],
                    "question": it["question"],
                    "answer": it["answer"],
                    "question_type": it["question_type"],
                    "model": r["model"],
                    "parse_error": None,
                    "raw": None,
                }
            )
    return out


# ---------------------------------------------------------------- predictions files
def write_prediction_file(path: Path, preds: dict[str, str], layout: str | None = None) -> Path:
    """Write `{id: text}` in one of the layouts `read_predictions` accepts: `jsonl` (lines `{id, prediction_text}`),
    `records` (a JSON list of those) or `dict` (a JSON object); by default `jsonl` for *.jsonl, else `dict`."""
    path = Path(path)
    layout = layout or ("jsonl" if path.suffix == ".jsonl" else "dict")
    records = [{"id": k, "prediction_text": v} for k, v in preds.items()]
    text = {
        "jsonl": lambda: "".join(json.dumps(r) + "\n" for r in records),
        "records": lambda: json.dumps(records),
        "dict": lambda: json.dumps(preds),
    }[layout]()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return path


# ---------------------------------------------------------------- tiny models
def tiny_bert_config(num_hidden_layers: int = 2, **overrides):
    "The tests' tiny random BERT: 32 hidden units, 2 heads, MiniLM-L6's vocabulary (save its tokenizer beside it)."
    from transformers import BertConfig

    from indicipr.systems import qa_model

    return BertConfig(
        vocab_size=qa_model.load_tokenizer("minilm-l6").vocab_size,
        hidden_size=32,
        num_hidden_layers=num_hidden_layers,
        num_attention_heads=2,
        intermediate_size=64,
        max_position_embeddings=512,
        **overrides,
    )


# ---------------------------------------------------------------- notebooks and the command line
def user_env(**extra) -> dict:
    "The environment of a user's shell in the venv: not inside the runner's main job."
    env = {k: v for k, v in os.environ.items() if k not in ("INDICIPR_MAIN_JOB", "INDICIPR_RUN_DIR", "INDICIPR_ROOT")}
    return {**env, "PATH": f"{BIN}:{env['PATH']}", **extra}


def sync_check_repo(tmp_path: Path):
    """A fresh git repo holding the sync check and one notebook of the project, which passes the check: `(repo, git,
    check)`; `git(*args)` runs git there, `check()` the sync check (its completed process)."""
    repo = tmp_path / "repo"
    for f in ["settings.ini", "setup.py", ".ci/check_sync.sh", "notebooks/00b_data.core.ipynb"]:
        (repo / f).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / f, repo / f)
    # the whole package: the check's metadata step imports the notebook reader, which stands on every floor below it
    shutil.copytree(ROOT / "indicipr", repo / "indicipr", ignore=shutil.ignore_patterns("__pycache__", "_modidx.py"))
    env = user_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")

    def git(*a):
        subprocess.run(["git", *a], cwd=repo, check=True, capture_output=True, env=env)

    subprocess.run(
        [str(BIN / "nbdev_export")], cwd=repo, check=True, env=env
    )  # _modidx.py of this one-notebook project
    git("init", "-q")
    git("add", "-A")
    git("commit", "-qm", "base")

    def check():
        return subprocess.run([str(repo / ".ci" / "check_sync.sh")], cwd=repo, capture_output=True, text=True, env=env)

    ok = check()
    assert ok.returncode == 0, ok.stdout + ok.stderr
    return repo, git, check


def paper_build_args(tag: str, statutes: Path, llm_url: str) -> list[str]:
    "`indicipr build` of the paper profile from typeset statutes, every LLM role on the server at `llm_url`."
    return [
        "build",
        "--tag",
        tag,
        "--statutes",
        str(statutes),
        "--profile",
        "paper",
        "--yes",
        "-p",
        "llm_endpoints",
        f"*={llm_url}",
    ]


# ---------------------------------------------------------------- notebooks
def run_stage_notebook(name: str, out: Path, params: dict) -> Path:
    "Run one stage notebook of the checkout (`04_build.split`, ...) with papermill through the project's runner."
    runner.run_notebook(ROOT / "notebooks" / f"{name}.ipynb", out, params, runner.ensure_kernel())
    return out


def notebook_output_text(path: Path) -> str:
    "All text the cells of an executed notebook printed or displayed."
    import nbformat

    out = []
    for cell in nbformat.read(str(path), as_version=4).cells:
        for o in cell.get("outputs", []):
            out.append(o.get("text", "") if "text" in o else "\n".join(str(v) for v in o.get("data", {}).values()))
    return "\n".join(out)


# ---------------------------------------------------------------- servers on loopback
def unused_port() -> int:
    "A loopback port nothing listens on (bound once by the OS, then released)."
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def port_open(port: int) -> bool:
    "Whether something accepts connections on the loopback port."
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


# ---------------------------------------------------------------- a browser
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def chromium_or_skip() -> str:
    "Debian's chromium on PATH; the test is skipped without it, except in CI (`make test-deps` installs it)."
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        if os.environ.get("CI"):
            pytest.fail("chromium is not installed (make test-deps installs Debian's chromium)")
        pytest.skip("chromium not installed")
    return exe


# ---------------------------------------------------------------- skip guards
# In CI (`CI` set) a missing dependency fails the test instead of skipping it: the CI setup installs it.
needs_llama_cpp = pytest.mark.skipif(
    importlib.util.find_spec("llama_cpp") is None and not os.environ.get("CI"),
    reason="llama-cpp-python is not installed (pip install 'llama-cpp-python[server]')",
)
needs_lm_eval = pytest.mark.skipif(
    importlib.util.find_spec("lm_eval") is None and not os.environ.get("CI"),
    reason="lm-evaluation-harness is not installed (pip install -e '.[lm-eval]')",
)
