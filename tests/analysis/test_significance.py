"""Paired bootstrap and Holm correction of indicipr.analysis.significance; the benchmark script's checks."""

import subprocess
import sys
from itertools import combinations

import numpy as np
import pytest
from helpers import ROOT
from hypothesis import given, settings
from hypothesis import strategies as st

from indicipr.analysis import significance as S
from indicipr.scoring import bootstrap


@settings(max_examples=40, deadline=None)
@given(
    st.integers(2, 4),
    st.integers(3, 30),
    st.integers(0, 2**31 - 1),
    st.sampled_from([[0.0, 100.0], [0.0, 50.0, 100.0], [0.0, 33.33, 66.67, 100.0]]),
)
def test_vectorized_equals_loop_with_ties(n_systems, n_questions, seed, values):
    """Discrete scores make resampled differences tie exactly with the observed one: both versions agree."""
    rng = np.random.default_rng(seed)
    scores = rng.choice(values, size=(n_systems, n_questions))
    pairs = list(combinations(range(n_systems), 2))
    vec = bootstrap.paired_bootstrap(scores, pairs, 300, seed)
    loop = bootstrap.paired_bootstrap(scores, pairs, 300, seed, loop=True)
    assert (vec["p_value"].to_numpy() == loop["p_value"].to_numpy()).all()
    assert np.allclose(vec[["diff", "ci_low", "ci_high"]], loop[["diff", "ci_low", "ci_high"]], atol=1e-9)


def test_p_value_against_explicit_definition():
    rng = np.random.default_rng(3)
    a, b = rng.uniform(0, 100, 50), rng.uniform(0, 100, 50)
    res = bootstrap.paired_bootstrap(np.stack([a, b]), [(0, 1)], 2000, seed=11)
    idx = np.random.default_rng(11).integers(0, 50, size=(2000, 50))
    boot = (a - b)[idx].mean(axis=1)
    delta = (a - b).mean()
    expected = (1 + np.sum(np.abs(boot - delta) >= abs(delta) - bootstrap.TIE_TOLERANCE)) / 2001
    assert res["p_value"][0] == pytest.approx(expected)
    assert res["ci_low"][0] == pytest.approx(np.percentile(boot, 2.5))
    assert res["ci_high"][0] == pytest.approx(np.percentile(boot, 97.5))


def test_null_and_clear_differences():
    rng = np.random.default_rng(0)
    base = rng.uniform(0, 100, 344)
    same = bootstrap.compare_systems({"a": base, "b": base.copy()}, n_resamples=1000)
    assert same["p"][0] == 1.0
    assert same["ΔF1 (A−B)"][0] == 0.0
    better = bootstrap.compare_systems({"a": np.minimum(base + 10, 100), "b": base}, n_resamples=1000)
    assert better["p"][0] == 1 / 1001
    assert better["CI 2.5%"][0] > 0
    assert bool(better["Significant (α=0.05)"][0])
    # pure noise around the same mean: not significant in most seeds
    p = [
        bootstrap.compare_systems({"a": base + rng.normal(0, 5, 344), "b": base}, n_resamples=500, seed=s)["p"][0]
        for s in range(5)
    ]
    assert np.median(p) > 0.05


def test_holm_is_not_holm_sidak():
    p = [0.01, 0.02, 0.03, 0.04]
    assert np.allclose(bootstrap.holm(p), [0.04, 0.06, 0.06, 0.06])
    # where the two differ in the decision: Holm-Šidák would reject the smallest p at 0.05 (1 - 0.9873^4 = 0.0498), Holm does not
    p = [0.0127, 0.02, 0.03, 0.04]
    assert 1 - (1 - p[0]) ** 4 < 0.05 < bootstrap.holm(p)[0] == pytest.approx(4 * 0.0127)


def test_compare_systems_validates_inputs():
    with pytest.raises(ValueError, match="same questions"):
        bootstrap.compare_systems({"a": [1, 2, 3], "b": [1, 2]})
    with pytest.raises(ValueError, match="unknown systems"):
        bootstrap.compare_systems({"a": [1, 2], "b": [1, 2]}, pairs=[("a", "c")])


def test_benchmark_script_small():
    out = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / "significance.py"), "--resamples", "300", "--repeat", "1"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "identical p-values: True" in out.stdout
    assert "speed-up" in out.stdout


def _runs(scores: dict, families: dict, seeds: dict) -> dict:
    "Runs as metrics.score_runs makes them, from per-question F1 arrays (run name -> scores)."
    import pandas as pd

    out = {}
    for name, f1 in scores.items():
        group = name.split("_seed")[0]
        frame = pd.DataFrame(
            {"id": [f"pat_{i:06d}" for i in range(len(f1))], "act": "patents", "em": 0.0, "f1": f1, "char_f1": f1}
        )
        out[name] = {
            "group": group,
            "frame": frame,
            "summary": {"em": 0.0, "f1": float(np.mean(f1)), "char_f1": 0.0, "missing": 0},
            "meta": {"family": families[group], "seed": seeds.get(name), "model": group},
        }
    return out


def test_the_cards_comparisons_under_the_paper_profile():
    "InLegalBERT against each other encoder, one run per system (seed 0 by default), Holm over those three only."
    from indicipr.data.config import settings_for

    rng = np.random.default_rng(5)
    base = rng.uniform(0, 100, 344)
    encoders = ["bert-base", "legalbert-us", "incaselawbert", "inlegalbert"]
    scores, seeds = {}, {}
    for k, enc in enumerate(encoders):
        for s in range(3):
            scores[f"{enc}_seed{s}"] = np.clip(base + rng.normal(k * (1 if s == 0 else -5), 3, 344), 0, 100)
            seeds[f"{enc}_seed{s}"] = s
    scores["qwen_zero-shot"] = np.clip(base + 20, 0, 100)
    families = {**dict.fromkeys(encoders, "encoder"), "qwen_zero-shot": "llm"}
    runs = _runs(scores, families, seeds)
    st = settings_for("significance", "paper")
    focus, note = S.resolve_focus(runs, st.focus_system)
    assert focus == "inlegalbert" and "focus system" in note
    chosen = S.analysis_runs(runs, st.focus_seed)
    assert chosen["inlegalbert"] == "inlegalbert_seed0" and chosen["qwen_zero-shot"] == "qwen_zero-shot"
    frames = {s: runs[n]["frame"] for s, n in chosen.items()}
    partners = S.comparison_partners(runs, focus, st.compare_family)
    assert partners == ["bert-base", "legalbert-us", "incaselawbert"]
    table = S.card_comparisons(frames, focus, partners, n_resamples=2000, seed=0)
    assert table["System B"].tolist() == partners
    assert np.allclose(table["p (Holm)"], bootstrap.holm(table["p"]))  # Holm over the three comparisons only
    expected = [np.mean(scores["inlegalbert_seed0"] - scores[f"{p}_seed0"]) for p in partners]
    assert np.allclose(table["ΔF1 (A−B)"], expected)
    # offline: the best mean F1 is the focus, compared with every other system
    off = settings_for("significance", "offline")
    focus_off, _ = S.resolve_focus(runs, off.focus_system)
    assert focus_off == "qwen_zero-shot" and len(S.comparison_partners(runs, focus_off, off.compare_family)) == 4
