"""Selection and section-level split (indicipr.split) end to end: the embedded sample is rebuilt
from the recorded candidates byte for byte, every official file validates, no context or section
is in two splits, and a build in which a context would cross splits fails."""
from __future__ import annotations

import hashlib

import pytest

from indicipr.core import ACTS, act_for_id, read_jsonl, read_qa_file, write_jsonl
from indicipr import split as S
from indicipr.filters import filter_build

from test_filters import REAL_ROOT, recorded_candidates


@pytest.fixture
def root(tmp_path, monkeypatch):
    monkeypatch.setenv("INDICIPR_ROOT", str(tmp_path))
    return tmp_path


def _digest(folder):
    return {n: hashlib.sha256((folder / n).read_bytes()).hexdigest() for n in S.SPLIT_FILES.values()}


def _build(root, tag, candidates):
    write_jsonl(root / "data" / "build" / tag / "candidates.jsonl", candidates)
    filter_build(tag)
    return S.split_build(tag)


def test_replay_build_is_valid_deterministic_and_section_disjoint(root):
    s = _build(root, "replay", recorded_candidates())
    folder = root / "data" / "build" / "replay"
    first = _digest(folder)
    assert S.split_build("replay") == s and _digest(folder) == first          # rerun: same bytes
    splits = {k: read_qa_file(folder / n) for k, n in S.SPLIT_FILES.items()}
    prov = {p["id"]: p for p in read_jsonl(folder / "split_provenance.jsonl")}
    assert len(splits["merged"]) == s["selected"] == sum(len(splits[k]) for k in S.SPLITS)
    sections = {k: {(prov[r["id"]]["act"], prov[r["id"]]["section"]) for r in splits[k]} for k in S.SPLITS}
    contexts = {k: {r["context"] for r in splits[k]} for k in S.SPLITS}
    for a, b in (("train", "validation"), ("train", "test"), ("validation", "test")):
        assert not sections[a] & sections[b] and not contexts[a] & contexts[b]
    assert {act_for_id(r["id"]).key for r in splits["test"]} == set(ACTS)     # every Act in the sample's test split
    assert (S.context_jaccard(splits).Jaccard == 0).all()
    dest = S.publish_sample("replay")
    assert dest == root / "data" / "sample" and _digest(dest) == first


def test_committed_sample_is_what_the_pipeline_builds(root):
    "data/sample/ in the checkout equals a fresh build from the recorded generations."
    committed = REAL_ROOT / "data" / "sample"
    if not (committed / "merged_ip_qa.jsonl").is_file(): pytest.skip("no committed sample yet")
    _build(root, "replay", recorded_candidates())
    assert _digest(root / "data" / "build" / "replay") == _digest(committed)


def test_a_context_in_two_sections_makes_the_build_fail(root, monkeypatch):
    cands = recorded_candidates()
    twin = [{**c, "section": "999", "context_id": "patents_s999_c1", "candidate_id": c["candidate_id"].replace("s6_", "s999_")}
            for c in cands if c["context_id"] == "patents_s6_c1"]        # the same statute text under a second section
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
    bad = [{**c, "answer": c["answer"].upper() + " (paraphrased)"} for c in cands[:12]]   # SmolLM2-like: not extractive
    s = _build(root, "live", bad)
    assert s["selected"] == 0 and s["sizes"] == {"train": 0, "validation": 0, "test": 0, "merged": 0}
    s = _build(root, "live", bad + cands[5:9])                    # four good ones from one section
    assert s["selected"] == 4 and s["sizes"] == {"train": 4, "validation": 0, "test": 0, "merged": 4}
