"""Benchmark: vectorized paired bootstrap (indicipr.analysis.significance.paired_bootstrap) against a
straightforward per-resample Python loop (paired_bootstrap(..., loop=True)) on the same inputs and seed.

The card's setting: 10,000 resamples, every pair of 6 systems (15 pairs) on the 344 test
questions. Per-question F1 scores are generated (seeded) to look like real systems: a share of
exact answers (100), of misses (0) and partial overlaps in between, with systems of similar and of
very different quality so that p-values range from tiny to large. Both implementations must give
identical p-values (and CIs up to rounding); the script prints both times and their ratio.

    python benchmarks/significance.py [--resamples 10000] [--systems 6] [--questions 344] [--repeat 3]
"""

import argparse
import sys
import time
from itertools import combinations
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from indicipr.scoring.bootstrap import holm, paired_bootstrap  # noqa: E402


def synthetic_scores(n_systems: int, n_questions: int, seed: int = 0) -> np.ndarray:
    "Per-question F1 (0-100) of `n_systems` systems with exact-match rates from 40% to 60%."
    rng = np.random.default_rng(seed)
    difficulty = rng.uniform(0, 1, n_questions)  # shared across systems: paired data
    scores = []
    for k in range(n_systems):
        p_exact = 0.40 + 0.20 * k / max(1, n_systems - 1)
        u = rng.uniform(0, 1, n_questions) * 0.6 + difficulty * 0.4
        partial = rng.uniform(10, 95, n_questions).round(2)
        scores.append(np.where(u < p_exact, 100.0, np.where(u > 0.9, 0.0, partial)))
    return np.stack(scores)


def best_time(fn, repeat: int) -> tuple[float, object]:
    "Fastest wall time of `repeat` calls and the last result."
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    return best, result


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--resamples", type=int, default=10_000)
    ap.add_argument("--systems", type=int, default=6)
    ap.add_argument("--questions", type=int, default=344)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3, help="timing repeats of the vectorized version (best is kept)")
    args = ap.parse_args(argv)

    scores = synthetic_scores(args.systems, args.questions, args.seed)
    pairs = list(combinations(range(args.systems), 2))
    print(
        f"paired bootstrap: {args.systems} systems ({len(pairs)} pairs) x {args.questions} questions, "
        f"{args.resamples} resamples, seed {args.seed}"
    )

    t_vec, vec = best_time(lambda: paired_bootstrap(scores, pairs, args.resamples, args.seed), args.repeat)
    t_loop, loop = best_time(lambda: paired_bootstrap(scores, pairs, args.resamples, args.seed, loop=True), 1)

    same_p = bool((vec["p_value"].to_numpy() == loop["p_value"].to_numpy()).all())
    same_ci = bool(
        np.allclose(vec[["diff", "ci_low", "ci_high"]], loop[["diff", "ci_low", "ci_high"]], rtol=0, atol=1e-9)
    )
    same_holm = bool((holm(vec["p_value"]) == holm(loop["p_value"])).all())
    print(f"vectorized: {t_vec:.3f} s (best of {args.repeat})")
    print(f"loop:       {t_loop:.3f} s")
    print(f"speed-up:   {t_loop / t_vec:.1f}x")
    print(f"identical p-values: {same_p}; identical Holm p-values: {same_holm}; CIs equal (atol 1e-9): {same_ci}")
    print(
        f"p-values: min {vec['p_value'].min():.4f}, median {vec['p_value'].median():.4f}, max {vec['p_value'].max():.4f}"
    )
    return 0 if (same_p and same_ci and same_holm) else 1


if __name__ == "__main__":
    sys.exit(main())
