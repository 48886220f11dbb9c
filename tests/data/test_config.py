"""A stage notebook's parameters and the CLI's flags set the fields of the stage's settings (`indicipr.data.config`) by
their names; what is not a setting (where the run reads and writes, which endpoints, the construction plan) is named
here with the reason."""

import argparse
import ast
import dataclasses
import json

from helpers import ROOT

from indicipr.run import cli
from indicipr.data import config

STAGE_OF_NOTEBOOK = {
    "01_build.corpus": "corpus",
    "02_build.generate": "generate",
    "04_build.split": "split",
    "07_systems.bm25": "bm25",
    "08_systems.encoders": "encoders",
    "09_systems.llm_qa": "llm_qa",
    "09a_systems.grounded": "grounded",
    "10_analysis.significance": "significance",
    "11_analysis.error_analysis": "significance",
    "12_analysis.quality": "quality",
}
RUN = {"data_source", "profile", "figures_dir"}  # every notebook's: the run context
PLAN = {"rebuild", "build_tag", "builds", "publish_replay"}  # core.construction_plan: which builds, whether to publish
LOCATIONS = {"predictions_from"}  # where inputs are
NOT_SETTINGS = {
    "08_systems.encoders": {
        "choose_recipe"
    },  # whether to run the recipe comparison, a job of its own (make recipe-choice)
    "12_analysis.quality": {"run_judge", "judge_models"},  # whether to call the judges; model names, made `judges` by
    # config.judges_from_models
}


def parameter_names(notebook: str) -> list[str]:
    cells = json.loads((ROOT / "notebooks" / f"{notebook}.ipynb").read_text(encoding="utf-8"))["cells"]
    cell = next(c for c in cells if "parameters" in c.get("metadata", {}).get("tags", []))
    tree = ast.parse("".join(cell["source"]))
    return [
        (n.target if isinstance(n, ast.AnnAssign) else n.targets[0]).id
        for n in tree.body
        if isinstance(n, (ast.Assign, ast.AnnAssign))
    ]


def field_names(stage: str) -> set[str]:
    return {f.name for f in dataclasses.fields(config.STAGE_SETTINGS[stage]["offline"])}


def test_every_stage_parameter_is_a_setting_or_named_here():
    for notebook, stage in STAGE_OF_NOTEBOOK.items():
        others = RUN | PLAN | LOCATIONS | NOT_SETTINGS.get(notebook, set())
        unknown = [p for p in parameter_names(notebook) if p not in field_names(stage) | others]
        assert not unknown, f"{notebook}: parameters that are not fields of {stage}'s settings: {unknown}"


def test_the_train_commands_flags_are_the_encoder_settings():
    parser = cli.build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    dests = {a.dest for a in sub.choices["train"]._actions} - {"help", "data_source", "profile"}
    flag_for = {"no_intermediate": "intermediate", "fp32": "cpu_bf16"}  # switches that turn a setting off
    assert {flag_for.get(d, d) for d in dests} <= field_names("encoders")


def test_the_config_module_sits_on_the_foundation_only():
    """The settings and the run context need paths, the card, the numerics, the benchmark's loader and the table and
    figure writers, nothing of a stage."""
    from test_import_graph import import_graph

    below = {"data.basics", "data.core", "data.numerics", "data.qa_files", "data.benchmark", "data.artifacts"}
    assert import_graph()["data.config"] <= below


def test_a_replaced_environment_variable_changes_nothing_and_is_named_once(monkeypatch, caplog):
    "A shell that exports a setting's former variable gets the profile's settings and one warning naming the parameter."
    from indicipr.llm import servers as llm_servers
    from indicipr.systems import pool, training

    for name in config.REPLACED_ENV:
        monkeypatch.setenv(name, "2" if name == "INDICIPR_TRAIN_WORKERS" else "1")
    config._warn_replaced.cache_clear()
    with caplog.at_level("WARNING", logger="indicipr.data.config"):
        assert config.settings_for("encoders", "paper") == config.ENCODERS["paper"]
        assert config.settings_for("llm_qa", "offline") == config.LLM_QA["offline"]
    said = [r.getMessage() for r in caplog.records]
    assert all(sum(m.startswith(f"{name} ") for m in said) == 1 for name in config.REPLACED_ENV)
    assert any("`qa_models`" in m for m in said)
    assert llm_servers.role_models("qa") is None and llm_servers.role_model("generation") is None
    assert not training.resolved_cuda_graphs(training.TrainConfig())
    assert pool._pool_size(12, None) != 2  # 'auto' (1 on a CPU): never the variable's 2


def test_no_module_but_config_names_a_replaced_variable():
    for path in (ROOT / "indicipr").glob("*.py"):
        if path.name not in ("config.py", "_modidx.py"):
            text = path.read_text(encoding="utf-8")
            assert not [k for k in config.REPLACED_ENV if k in text], path.name
