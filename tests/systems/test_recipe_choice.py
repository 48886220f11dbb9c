"""The offline recipe's choice (`indicipr.systems.recipe_choice`): on the validation split, and by cross-validation over the
training and validation sections (`benchmarks/recipe_choice.py`); candidates kept apart, runs resumed."""

import dataclasses
import importlib.util
import json
import os

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
from helpers import QA_SMALL, ROOT, read_qa_small

from indicipr.data import config, core, qa_files  # noqa: E402
from indicipr.systems import encoders
from indicipr.systems import recipe_choice as rc
from indicipr.systems.qa_model import model_short_name

PHASE1 = config.IntermediateTraining(per_piece=1, crop_words=40, epochs=0.5, learning_rate=1e-3)
CANDIDATES = (
    rc.Candidate("plain", "phase 2 alone", None, 0.0, 0.5),
    rc.Candidate("two phases", "phase 1, then phase 2 with rehearsal", PHASE1, 0.5, 0.5),
)


@pytest.mark.slow  # training, over 8 s on 2 cores
def test_candidates_train_apart_score_validation_and_resume(tiny_model_dir, root, monkeypatch):
    base = config.settings_for(
        "encoders", "offline", models=[tiny_model_dir], learning_rate=1e-3, max_length=128, stride=32
    )
    choice = config.RecipeChoice(candidates=CANDIDATES, seeds=(0,), base=base)
    ctx = config.run_context(str(QA_SMALL), "offline", stage="encoders", recipe_choice=choice)
    ds = ctx.benchmark()
    rows = encoders.compare_recipes(ctx)
    assert [r["candidate"] for r in rows] == ["plain", "two phases"]
    assert all(0.0 <= r["f1"] <= 100.0 for r in rows)
    models = core.scratch_dir() / "models"  # a run by hand's checkpoints: runs/interactive/models/<tag>/settings-<key>/
    assert sorted(p.name for p in models.iterdir() if p.name.startswith("recipe_choice_")) == sorted(
        {rc.group_tag(c.settings(base)) for c in CANDIDATES}
    )  # each distinct phase 1 under its own tag, never the data source's own models
    assert not (models / "qa_small").exists()
    preds = next(config.run_context("recipe_choice_none").predictions.glob("*.jsonl"))  # a run's own folder
    scored = {r["id"] for r in qa_files.read_jsonl(preds) if "id" in r}
    assert scored == {r["id"] for r in ds["validation"]}  # the validation split, never test
    assert len(list(qa_files.read_jsonl(rc.runs_path()))) == 2

    def no_training(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(encoders, "run_encoders", no_training)
    assert encoders.compare_recipes(ctx) == rows
    table = rc.recipe_table(rows, CANDIDATES)
    assert table["chosen"].sum() >= 1
    assert rc.chosen_recipe(table, CANDIDATES).name in {"plain", "two phases"}


def test_the_test_split_takes_no_part(root):
    with pytest.raises(core.InputError, match="validation"):
        choice = config.RecipeChoice(candidates=CANDIDATES, split="test")
        encoders.compare_recipes(config.run_context(str(QA_SMALL), "offline", stage="encoders", recipe_choice=choice))


def test_a_tie_of_recipes_takes_the_first_listed_and_says_so():
    "Equal mean validation F1: the first candidate listed (the simplest) is taken, and the note names the tie."
    rows = [
        {"candidate": c.name, "seed": s, "em": 10.0, "f1": 30.0 + s} for c in rc.RECIPE_CANDIDATES[:2] for s in (0, 1)
    ]
    table = rc.recipe_table(rows)
    assert rc.chosen_recipe(table).name == rc.RECIPE_CANDIDATES[0].name
    note = rc.recipe_choice_note(config.settings_for("encoders", "offline"), table)
    names = ", ".join(c.name for c in rc.RECIPE_CANDIDATES[:2])
    assert f"tie: candidates {names} all reach mean F1 30.50; the simplest, {rc.RECIPE_CANDIDATES[0].name}" in note


class NoTest(dict):
    "A loaded benchmark whose test split cannot be read."

    def __getitem__(self, split):
        if split == "test":
            raise AssertionError("the test split was read")
        return dict.__getitem__(self, split)


@pytest.mark.slow  # training: 2 candidates x 2 folds x 1 seed of a tiny model, under a minute on 2 cores
def test_cross_validation_holds_each_fold_out_resumes_and_chooses(tiny_model_dir, root, monkeypatch, capsys):
    base = config.settings_for(
        "encoders", "offline", models=[tiny_model_dir], learning_rate=1e-3, max_length=128, stride=32
    )
    choice = config.RecipeChoice(candidates=CANDIDATES, seeds=(0,), folds=2, base=base, tokens_per_second=1000.0)
    ctx = config.run_context(str(QA_SMALL), "offline", stage="encoders", recipe_choice=choice)
    ds = ctx.benchmark()
    ctx = dataclasses.replace(ctx, _benchmarks={False: NoTest(train=ds["train"], validation=ds["validation"])})
    pool = {r["id"] for split in ("train", "validation") for r in ds[split]}
    assert encoders.cross_validate_recipes(ctx) is None  # not confirmed: nothing trains
    said = capsys.readouterr().out
    assert f"2 candidates x 2 folds x 1 seeds on the {len(pool)} training and validation questions" in said
    assert "4 runs (0 finished before): 4 to train, " in said and "tokens/s (measured here)" in said
    assert not rc.cv_dir(ctx.source_tag).exists()

    confirmed = dataclasses.replace(choice, confirm_cost=True)
    ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, recipe_choice=confirmed))
    table = encoders.cross_validate_recipes(ctx)
    assert table["candidate"].tolist() == ["plain", "two phases"] and table["runs"].tolist() == [2, 2]
    assert table["chosen"].sum() == 1 and table["best"].sum() == 1
    assert (table.loc[table["best"], "ΔF1 vs best"] == 0).all()
    assert (table["main-job tokens (M)"] > 0).all()
    runs = [json.loads(p.read_text()) for p in rc.cv_dir(ctx.source_tag).glob("*.json")]
    assert len(runs) == 4
    test_ids = {r["id"] for r in read_qa_small("test")}
    for name in ("plain", "two phases"):  # each question held out once, by one fold; never a test question
        held = [set(r["predictions"]) for r in runs if r["candidate"] == name]
        assert not held[0] & held[1] and held[0] | held[1] == pool and not pool & test_ids
    models = core.scratch_dir() / "models"
    kept = sorted(p.name for d in models.glob("recipe_choice_*_cv_*") for p in d.glob("settings-*/*"))
    assert kept == [f"{model_short_name(tiny_model_dir)}_intermediate"] * 2  # phase 1 of each fold; phase 2 removed

    def no_training(*a, **k):
        raise AssertionError("a finished run was trained again")

    monkeypatch.setattr(encoders, "run_encoders", no_training)
    ctx = dataclasses.replace(ctx, settings=dataclasses.replace(ctx.settings, recipe_choice=choice))
    again = encoders.cross_validate_recipes(ctx)  # nothing left to train: nothing to confirm
    assert again.equals(table)
    assert "4 runs (4 finished before): 0 to train, 0.00M tokens" in capsys.readouterr().out


def recipe_choice_script():
    "`benchmarks/recipe_choice.py`, what `make recipe-choice` runs, as a module."
    spec = importlib.util.spec_from_file_location("recipe_choice_script", ROOT / "benchmarks" / "recipe_choice.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    return script


def test_recipe_choice_writes_its_table_in_the_run_folder_only_when_confirmed(root, tmp_path, monkeypatch, capsys):
    """Unconfirmed: exit 1, nothing written; confirmed: the table in `<run-dir>/figures/tables/`, its figure in
    `<run-dir>/figures/` and the rule's choice; `--record`: the same bytes over the committed table and figure."""
    script = recipe_choice_script()
    plain, other = rc.RECIPE_CANDIDATES[:2]
    records = [
        {
            "id": f"cop_{i:06d}",
            "act": "copyright",
            "title": f"Section {i}. X",
            "context": "alpha beta",
            "answers": {"text": ["alpha"]},
        }
        for i in range(4)
    ]
    runs = [
        {
            "candidate": c.name,
            "fold": 0,
            "seed": 0,
            "predictions": {r["id"]: "alpha" for r in records},
            "phase2_tokens": t,
        }
        for c, t in ((plain, 500), (other, 100))
    ]
    table = rc.cv_table(runs, records, (plain, other), n_resamples=100)
    seen = []

    def fake(ctx):
        choice = ctx.settings.recipe_choice
        seen.append((choice.folds, choice.seeds, ctx.tables))
        return table if choice.confirm_cost else None

    monkeypatch.setattr(encoders, "cross_validate_recipes", fake)
    monkeypatch.delenv("INDICIPR_YES", raising=False)
    out = tmp_path / "run"
    assert script.main(["--folds", "3", "--seeds", "5", "--run-dir", str(out)]) == 1
    assert "confirm the cost with --yes" in capsys.readouterr().err and not list(out.rglob("recipe_choice.*"))
    assert script.main(["--run-dir", str(out), "--yes"]) == 0
    assert seen == [(3, (5,), out / "figures" / "tables"), (4, (0, 1), out / "figures" / "tables")]
    said = capsys.readouterr().out
    assert f"chosen by cross-validation: {other.name} (CV F1 100.00, +0.00 against the best, {plain.name}" in said
    assert sorted(p.name for p in (out / "figures" / "tables").iterdir()) == [
        f"recipe_choice.{e}" for e in ("csv", "md", "tex")
    ]
    assert sorted(p.name for p in (out / "figures").glob("recipe_choice.*")) == [
        "recipe_choice.pdf",
        "recipe_choice.png",
    ]
    assert not (root / "figures").exists()
    checkout = tmp_path / "checkout"
    (checkout / "figures" / "tables").mkdir(parents=True)
    (checkout / "figures" / "tables" / "recipe_choice.md").write_text("an older table\n")
    monkeypatch.setattr(script, "ROOT", checkout)
    assert script.main(["--run-dir", str(out), "--yes", "--record"]) == 0
    said = capsys.readouterr().out
    for name in (
        "tables/recipe_choice.csv",
        "tables/recipe_choice.md",
        "tables/recipe_choice.tex",
        "recipe_choice.png",
    ):
        assert f"recorded: figures/{name}" in said
        assert (checkout / "figures" / name).read_bytes() == (out / "figures" / name).read_bytes()
    assert not [p for p in checkout.rglob("*") if p.name.endswith(".tmp")]


def test_recipe_choice_refuses_a_fold_count_in_one_sentence(capsys):
    "`make recipe-choice`'s script: a fold count out of range is one sentence and exit 2, before anything loads."
    script = recipe_choice_script()
    assert script.main(["--folds", "1"]) == 2
    assert capsys.readouterr().err.strip() == "recipe_choice.py: --folds 1: give a number from 2 to 1,000"


def test_recipe_choice_compares_the_named_candidates_and_refuses_an_unknown_one(monkeypatch, tmp_path, capsys):
    "`--candidates`: only those named reach the comparison, in the order given; a name of none is one sentence, exit 2."
    script = recipe_choice_script()
    seen = []
    monkeypatch.setattr(encoders, "cross_validate_recipes", lambda ctx: seen.append(ctx.settings.recipe_choice))
    monkeypatch.delenv("INDICIPR_YES", raising=False)
    last, first = rc.RECIPE_CANDIDATES[-1], rc.RECIPE_CANDIDATES[0]
    assert script.main(["--run-dir", str(tmp_path / "run"), "--candidates", last.name, first.name, last.name]) == 1
    assert seen[0].candidates == (last, first)
    assert script.main(["--run-dir", str(tmp_path / "run"), "--candidates", "three epochs"]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert err.startswith(
        "recipe_choice.py: --candidates 'three epochs': no such candidate; give names of 'phase 2 alone'"
    )
    assert len(seen) == 1
