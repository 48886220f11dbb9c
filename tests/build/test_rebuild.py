"""The rebuild job (`indicipr build`) end to end on a small scale: India Code-style PDFs of two Acts
(a few sections each, typeset by `standins.india_code_pdf`) -> notebooks 01-04 with `rebuild=True` and a build tag,
generation against the OpenAI-compatible stand-in under the name `gpt-4o` -> the four official files in
`data/build/<tag>/` of a temporary project root, valid, section-disjoint, with the stage-count table; a rerun makes
no model call (the response cache); `data/sample/` (the temporary copy and the checkout's) stays byte-identical."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pandas as pd
import pytest
from helpers import ROOT, paper_build_args
from standins.india_code_pdf import typeset_acts
from standins.openai_server import OpenAIStandIn

from indicipr.data import benchmark, core
from indicipr.run import cli, runner
from indicipr.data.core import OFFICIAL_FILES
from indicipr.data.qa_files import load_qa_file, read_jsonl

ACTS_USED = ("patents", "copyright")
SECTIONS_PER_ACT = 6
TAG = "small"


def digests(folder: Path) -> dict[str, str]:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


def small_statutes() -> list[dict]:
    "The first sections of two Acts from the project's statute text."
    records = list(read_jsonl(ROOT / "data" / "sample" / "statutes" / "sections.jsonl"))
    return [r for act in ACTS_USED for r in [r for r in records if r["act"] == act][:SECTIONS_PER_ACT]]


@pytest.fixture
def project(tmp_path, monkeypatch):
    "A temporary project root holding the notebooks, settings.ini and a copy of data/sample/."
    root = tmp_path / "proj"
    (root / "indicipr").mkdir(parents=True)  # project_root() wants settings.ini and indicipr/ beside it
    shutil.copy(ROOT / "settings.ini", root / "settings.ini")
    shutil.copytree(ROOT / "notebooks", root / "notebooks", ignore=shutil.ignore_patterns(".ipynb_checkpoints"))
    shutil.copytree(ROOT / "data" / "sample", root / "data" / "sample")
    monkeypatch.setenv("INDICIPR_ROOT", str(root))
    monkeypatch.setenv("MPLBACKEND", "Agg")
    for k in (
        "INDICIPR_LLM_ENDPOINTS",
        "INDICIPR_LLM_BASE_URL",
        "INDICIPR_LLM_API_KEY",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(k, raising=False)
    return root


def test_build_rejects_bad_tags_and_missing_statutes_before_running(project, capsys):
    assert cli.main(["build", "--tag", "replay"]) == 2  # the sample's own build
    assert cli.main(["build", "--tag", "a/../b"]) == 2
    assert cli.main(["build", "--tag", "ok", "--statutes", str(project / "nope")]) == 2
    assert "nope" in capsys.readouterr().err
    assert not (project / "runs").exists()
    assert not (project / "data" / "build").exists()


@pytest.mark.slow
def test_build_turns_typeset_pdfs_into_official_files_and_never_writes_data_sample(project, tmp_path):
    pdfs = tmp_path / "pdfs"
    typeset_acts(small_statutes(), pdfs)
    assert sorted(p.name for p in pdfs.iterdir()) == sorted(f"{a}.pdf" for a in ACTS_USED)
    sample_before, real_sample_before = digests(project / "data" / "sample"), digests(ROOT / "data" / "sample")
    with OpenAIStandIn() as server:
        argv = paper_build_args(TAG, pdfs, server.base_url)
        assert cli.main([*argv, "--run-dir", str(tmp_path / "run1")]) == 0
        first = server.summary()
        folder = project / "data" / "build" / TAG
        contexts = list(read_jsonl(folder / "contexts.jsonl"))
        assert contexts
        assert {c["act"] for c in contexts} == set(ACTS_USED)
        assert first["by_model_kind"] == {"gpt-4o generation": len(contexts)}
        assert not server.repeated()
        assert cli.main([*argv, "--run-dir", str(tmp_path / "run2")]) == 0  # rerun: all from the cache
        assert server.summary()["served"] == first["served"]

    splits = {
        s: load_qa_file(folder / n, strict=True).records for s, n in OFFICIAL_FILES.items()
    }  # raises on any invalid line
    assert splits["merged"] and sorted(r["id"] for s in ("train", "validation", "test") for r in splits[s]) == sorted(
        r["id"] for r in splits["merged"]
    )
    assert {core.record_act(r) for r in splits["merged"]} <= set(ACTS_USED)
    assert {r["context"] for r in splits["train"]}.isdisjoint(r["context"] for r in splits["test"])
    counts = pd.read_csv(folder / "figures" / "tables" / f"construction_counts_{TAG}.csv").set_index("Stage")
    assert counts.loc["Initial statutory contexts", "Count"] == len(contexts)
    assert counts.loc["Final QA pairs", "Count"] == len(splits["merged"]) > 0
    assert (
        counts.loc["Raw QA candidates", "Count"]
        >= counts.loc["Filtered QA candidates", "Count"]
        >= len(splits["merged"])
    )
    assert (folder / "figures" / "tables" / f"filters_{TAG}.csv").is_file()
    assert digests(project / "data" / "sample") == sample_before
    assert digests(ROOT / "data" / "sample") == real_sample_before
    assert sorted(p.name for p in (project / "data" / "build").iterdir()) == [TAG]  # no replay/live build on the side

    # the score job on the new folder: official files only, no model
    figs = tmp_path / "score"
    runner.run_notebook(
        project / "notebooks" / "02_build.generate.ipynb",
        tmp_path / "score.ipynb",
        {"data_source": str(folder), "profile": "paper", "figures_dir": str(figs)},
        runner.ensure_kernel(),
    )
    per_act = pd.read_csv(figs / "tables" / f"generation_qa_per_act_{benchmark.source_tag(folder)}.csv").set_index(
        "Act"
    )
    assert per_act.loc["Total", "QA pairs"] == len(splits["merged"])
