"""Selection and section-level split (indicipr.build.split) end to end: the embedded sample is rebuilt
from the recorded candidates byte for byte, every official file validates, no context or section
is in two splits, a build in which a context would cross splits fails, only the offline rebuild of
the sample writes data/sample/, and the stage notebook under the paper profile with official files
builds and publishes nothing."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pandas as pd
import pytest
from helpers import QA_SMALL, ROOT, read_qa_small_all, recorded_candidates, run_stage_notebook

from indicipr.build import split as S
from indicipr.data.core import ACTS, OFFICIAL_FILES, act_for_id
from indicipr.build.filters import filter_build
from indicipr.data.qa_files import load_qa_file, read_jsonl, write_jsonl


def _digest(folder):
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in OFFICIAL_FILES.values()}


def _build(root, tag, candidates):
    write_jsonl(root / "data" / "build" / tag / "candidates.jsonl", candidates)
    filter_build(tag)
    return S.split_build(tag)


def test_replay_build_is_valid_deterministic_and_section_disjoint(root, main_job):
    s = _build(root, "replay", recorded_candidates())
    folder = root / "data" / "build" / "replay"
    first = _digest(folder)
    assert S.split_build("replay") == s and _digest(folder) == first  # rerun: same bytes
    splits = {k: load_qa_file(folder / n, strict=True).records for k, n in OFFICIAL_FILES.items()}
    prov = {p["id"]: p for p in read_jsonl(folder / "split_provenance.jsonl")}
    assert len(splits["merged"]) == s["selected"] == sum(len(splits[k]) for k in S.SPLITS)
    sections = {k: {(prov[r["id"]]["act"], prov[r["id"]]["section"]) for r in splits[k]} for k in S.SPLITS}
    contexts = {k: {r["context"] for r in splits[k]} for k in S.SPLITS}
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        assert not sections[a] & sections[b] and not contexts[a] & contexts[b]
    assert {act_for_id(r["id"]).key for r in splits["test"]} == set(ACTS)  # every Act in the sample's test split
    assert (S.context_jaccard(splits).Jaccard == 0).all()
    dest = S.publish_sample("replay")
    assert dest == root / "data" / "sample" and _digest(dest) == first


def test_committed_sample_is_what_the_pipeline_builds(root):
    "data/sample/ in the checkout equals a fresh build from the recorded generations."
    committed = ROOT / "data" / "sample"
    if not (committed / "merged_ip_qa.jsonl").is_file():
        pytest.skip("no committed sample yet")
    _build(root, "replay", recorded_candidates())
    assert _digest(root / "data" / "build" / "replay") == _digest(committed)


def test_a_context_in_two_sections_makes_the_build_fail(root, monkeypatch):
    cands = recorded_candidates()
    twin = [
        {
            **c,
            "section": "999",
            "context_id": "patents_s999_c1",
            "candidate_id": c["candidate_id"].replace("s6_", "s999_"),
        }
        for c in cands
        if c["context_id"] == "patents_s6_c1"
    ]  # the same statute text under a second section
    real_assign = S.assign_sections

    def assign(cs, ratios, seed):
        a = real_assign(cs, ratios, seed)
        a["patents", "999"] = "test" if a["patents", "6"] != "test" else "train"
        return a

    monkeypatch.setattr(S, "assign_sections", assign)
    with pytest.raises(S.SplitIntegrityError, match="context text .* is in both"):
        _build(root, "dup", cands + twin)


def test_a_tiny_or_empty_live_build_still_writes_valid_files(root):
    cands = recorded_candidates()
    bad = [{**c, "answer": c["answer"].upper() + " (paraphrased)"} for c in cands[:12]]  # SmolLM2-like: not extractive
    s = _build(root, "live", bad)
    assert s["selected"] == 0 and s["sizes"] == {"train": 0, "validation": 0, "test": 0, "merged": 0}
    s = _build(root, "live", bad + cands[5:9])  # four good ones from one section
    assert s["selected"] == 4 and s["sizes"] == {"train": 4, "validation": 0, "test": 0, "merged": 4}


def test_only_the_offline_rebuild_of_the_sample_writes_data_sample(root, main_job):
    _build(root, "replay", recorded_candidates())
    sample = root / "data" / "sample"
    for profile, source in (
        ("paper", "hub"),
        ("paper", "sample"),
        ("offline", "hub"),
        ("offline", str(root / "official")),
    ):
        with pytest.raises(S.SamplePublishError, match="only the offline rebuild"):
            S.publish_sample("replay", profile=profile, data_source=source)
        assert not sample.exists()
    assert S.publish_sample("replay", dest=root / "elsewhere", profile="paper", data_source="hub") == root / "elsewhere"
    assert S.publish_sample("replay", profile="offline", data_source="sample") == sample


def test_per_act_tables_put_unknown_prefixes_in_an_unknown_row():
    splits = read_qa_small_all()
    renamed = {k: [{**r, "id": r["id"].replace("tm_", "qqz_")} for r in v] for k, v in splits.items()}
    table = S.per_act_distribution(renamed, card=True).set_index("Act")
    n_tm = sum(r["id"].startswith("tm_") for r in splits["merged"])
    assert table.loc["Unknown", "Full dataset"] == n_tm > 0 and table.loc["Trade Marks", "Full dataset"] == 0
    assert pd.isna(table.loc["Unknown", "Card full"]) and table.loc["Total", "Full dataset"] == len(splits["merged"])
    assert S.context_jaccard(renamed).set_index("Act").loc["Unknown", "Jaccard"] == 0.0


def _digests(folder: Path) -> dict:
    return {
        p.relative_to(folder).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.slow
def test_stage_notebook_under_paper_with_official_files_builds_and_publishes_nothing(root, tmp_path):
    "04_build.split run with papermill: paper profile, a folder of official files -> checks rendered, no build, data/sample untouched."
    import shutil

    shutil.copytree(ROOT / "data" / "sample", root / "data" / "sample")
    write_jsonl(root / "data" / "build" / "replay" / "candidates.jsonl", recorded_candidates())
    filter_build("replay")
    before_sample, before_build = _digests(root / "data" / "sample"), _digests(root / "data" / "build")
    official = tmp_path / "official"
    shutil.copytree(QA_SMALL, official)
    figs = tmp_path / "figs"
    params = {"data_source": str(official), "profile": "paper", "figures_dir": str(figs)}
    run_stage_notebook("04_build.split", tmp_path / "out.ipynb", params)
    assert _digests(root / "data" / "sample") == before_sample and _digests(root / "data" / "build") == before_build
    integrity = pd.read_csv(figs / "tables" / "split_integrity_official.csv")
    assert len(integrity) == 10 and integrity["Holds"].all()
    assert (figs / "tables" / "split_jaccard_official.csv").exists() and not (
        figs / "tables" / "selection.csv"
    ).exists()
    assert "Card full" not in pd.read_csv(
        figs / "tables" / "split_per_act_official.csv"
    )  # not the card's sizes: no card column
