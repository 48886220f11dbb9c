#!/usr/bin/env python
"""The offline encoder's recipe, chosen by group k-fold cross-validation over the training and validation sections.

    .venv/bin/python benchmarks/recipe_choice.py                       # what the runs not yet finished cost; nothing trains
    .venv/bin/python benchmarks/recipe_choice.py --yes                 # train them (or INDICIPR_YES=1), then the table
    .venv/bin/python benchmarks/recipe_choice.py --candidates "short phase 1, rehearsal" "rehearsal, 3 epochs"   # two of them
    make recipe-choice ARGS=--yes                                      # the same, into runs/recipe-choice/
    make recipe-choice ARGS="--yes --record"                           # and the committed table and figure

Not the main job and not CI: every candidate of `recipe_choice.RECIPE_CANDIDATES` × fold × seed is a fine-tuning run
(`encoders.cross_validate_recipes`; folds, seeds and the rule's margin are `config.RecipeChoice`'s unless given). First
it prints what the runs not yet finished cost: how many, the tokens they step through (counted from the windows each
phase trains on) and the time at a rate measured here (the finished runs' own, else a few timed training steps); it
trains them only when the cost is confirmed (`--yes` or `INDICIPR_YES=1`), exit 1 otherwise. Each finished run is kept in
`data/models/recipe_choice/cv/<source>/` (one file, written through a temporary file and a rename) and reused, so a killed
comparison resumes. The table `recipe_choice` goes to `<run-dir>/figures/tables/` and its figure to `<run-dir>/figures/`:
each candidate's cross-validated F1 ± sd, its difference from the best with the paired bootstrap's 95% interval, the
main job's training tokens and CPU minutes, and the rule's choice (the cheapest within a point of the best and not
significantly below it). With `--record` (this job's purpose, as `indicipr doctor --record` is the canary's) the same
files, byte for byte, replace the committed `figures/tables/recipe_choice.*` and `figures/recipe_choice.*`, which
notebook 08 shows and checks the offline profile against. The test split takes no part. Bad input: one sentence, exit 2.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from indicipr.data import basics, config, core  # noqa: E402


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--data-source", default="sample", help="'sample' (default), 'hub', or a folder with the official files"
    )
    p.add_argument("--folds", type=int, help="k of the group k-fold over the sections (default: RecipeChoice.folds, 4)")
    p.add_argument(
        "--seeds", nargs="+", type=int, help="training seeds of every fold (default: RecipeChoice.seeds, 0 1)"
    )
    p.add_argument(
        "--candidates",
        nargs="+",
        metavar="NAME",
        help="compare only these candidates of recipe_choice.RECIPE_CANDIDATES, by name (default: every one)",
    )
    p.add_argument(
        "--run-dir",
        default=str(ROOT / "runs" / "recipe-choice"),
        help="the table goes to <run-dir>/figures/tables/recipe_choice.* (default: runs/recipe-choice)",
    )
    p.add_argument(
        "--record",
        action="store_true",
        help="then copy the table and figure over the committed figures/tables/recipe_choice.* and figures/recipe_choice.*",
    )
    p.add_argument(
        "--yes", action="store_true", help="confirm the cost: train the runs not yet finished (or INDICIPR_YES=1)"
    )
    return p.parse_args(argv)


def check(option: str, value: int | None, low: int, high: int) -> None:
    if value is not None and not low <= value <= high:
        raise core.InputError(f"{option} {value}: give a number from {low:,} to {high:,}")


def record(ctx, name: str = "recipe_choice") -> list[Path]:
    """Copy the run folder's table (CSV, Markdown, LaTeX) and figure (PNG, PDF) `name` over the committed ones under the
    checkout's `figures/`, each an atomic write on purpose to a committed file."""
    pairs = (
        *((ctx.tables / f"{name}.{e}", ROOT / "figures" / "tables" / f"{name}.{e}") for e in ("csv", "md", "tex")),
        *((ctx.figures / f"{name}.{e}", ROOT / "figures" / f"{name}.{e}") for e in ("png", "pdf")),
    )
    return [basics.write_bytes_atomic(dest, src.read_bytes(), committed=True) for src, dest in pairs]


def run(args) -> int:
    check("--folds", args.folds, 2, 1000)
    for seed in args.seeds or ():
        check("--seeds", seed, 0, 2**32 - 1)
    run_dir = Path(args.run_dir).resolve()
    ctx = config.run_context(args.data_source, "offline", str(run_dir / "figures"), "encoders")
    choice = ctx.settings.recipe_choice
    confirmed = args.yes or config.run_environment()["confirm_cost"]
    from indicipr.systems import encoders, recipe_choice  # torch and transformers: after the run's context is checked

    candidates = recipe_choice.RECIPE_CANDIDATES if choice.candidates is None else choice.candidates
    if args.candidates:
        named = {c.name: c for c in candidates}
        unknown = [n for n in args.candidates if n not in named]
        if unknown:
            raise core.InputError(
                f"--candidates {unknown[0]!r}: no such candidate; give names of {', '.join(repr(n) for n in named)}"
            )
        candidates = tuple(named[n] for n in dict.fromkeys(args.candidates))
    choice = replace(
        choice,
        folds=args.folds or choice.folds,
        seeds=tuple(args.seeds or choice.seeds),
        confirm_cost=confirmed,
        candidates=candidates,
    )
    ctx = replace(ctx, settings=replace(ctx.settings, recipe_choice=choice), run_dir=run_dir)

    table = encoders.cross_validate_recipes(ctx)
    if table is None:
        print(f"not started: confirm the cost with --yes (or {core.YES_ENV}=1 in the environment)", file=sys.stderr)
        return 1
    recipe_choice.save_cv_choice(ctx, table, choice)
    print(recipe_choice.cv_note(config.settings_for("encoders", "offline"), table, candidates, choice.within))
    print(f"tables: {basics.mask_secrets(str(ctx.tables / 'recipe_choice.md'))}")
    if args.record:
        for path in record(ctx):
            print(f"recorded: {path.relative_to(ROOT)}")
    return 0


def main(argv=None) -> int:
    args = parse_args(argv)
    try:
        return run(args)
    except (core.InputError, FileNotFoundError) as e:
        print(basics.mask_secrets(f"recipe_choice.py: {e}"), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
