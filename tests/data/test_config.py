"""A stage notebook's parameters and the CLI's flags set the fields of the stage's settings (`indicipr.data.config`) by
their names; what is not a setting (where the run reads and writes, which endpoints, the construction plan) is named
here with the reason."""

import argparse
import ast
import dataclasses
import json

import pytest
from helpers import ROOT

from indicipr.run import cli
from indicipr.data import config, core
from indicipr.data.core import InputError
from indicipr.run.stages import NOTEBOOK_STAGES  # the notebooks that build a stage's settings

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
    for notebook, stage in NOTEBOOK_STAGES.items():
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


BAD_RUN_VARIABLES = [  # (variable, value, what the refusal says after the name)
    ("INDICIPR_LLM_ENDPOINTS", "gpu1:8000", ": 'gpu1:8000' is not pattern=endpoint"),
    ("INDICIPR_LLM_ENDPOINTS", "*=ftp://h", " (models *): 'ftp://h' names no LLM server"),
    ("INDICIPR_LLM_BASE_URL", "gpu1:8000", ": 'gpu1:8000' names no LLM server"),
    ("INDICIPR_ACT_MAP", "garbage", " item 'garbage': expected prefix=act_key"),
    ("INDICIPR_YES", "maybe", "='maybe': use 1/0"),
]


@pytest.mark.parametrize("name,value,said", BAD_RUN_VARIABLES)
def test_a_run_variable_is_checked_on_every_data_source(name, value, said):
    "A stage's context is refused on the sample too, whether its stage reads the variable or not."
    with pytest.raises(InputError) as e:
        config.run_context("sample", "offline", stage="bm25", environ={name: value})
    assert str(e.value).startswith(name + said), e.value


def test_a_key_in_a_refused_run_variable_is_masked():
    with pytest.raises(InputError) as e:
        config.run_environment({"INDICIPR_LLM_BASE_URL": "http://user:SECRETKEY@gpu1 /v1"})
    assert "SECRETKEY" not in str(e.value) and str(e.value).startswith("INDICIPR_LLM_BASE_URL: 'http://user:***@")


@pytest.mark.parametrize(
    "stage,overrides,said",
    [
        ("significance", {"n_resamples": 99_999_999_999}, "parameter n_resamples must be from 1 to 1,000,000"),
        ("llm_qa", {"concurrency": 10**6}, "parameter concurrency must be from 1 to 256"),
        ("encoders", {"workers": 5000}, "parameter workers must be from 1 to 256, 'auto'"),
        ("llm_qa", {"qa_models": ""}, "parameter qa_models: '' is not a model name"),
        ("llm_qa", {"qa_models": []}, "parameter qa_models: [] is not a model name"),
        ("grounded", {"qa_models": [["smollm2"]]}, "parameter qa_models: [['smollm2']] is not a model name"),
        ("encoders", {"models": ["minilm-l6", ""]}, "parameter models: ['minilm-l6', ''] is not a model name"),
        ("generate", {"generation_model": "a,b"}, "parameter generation_model: 'a,b' is not one model name"),
        ("llm_qa", {"llm_endpoints": "*=gpu1:8000"}, "parameter llm_endpoints (models *): 'gpu1:8000' names no"),
    ],
)
def test_a_parameter_no_run_could_use_is_refused_by_its_settings(stage, overrides, said):
    "Upper bounds of the counts that size a run, the shape of model lists, routes that name a server each."
    with pytest.raises(InputError) as e:
        config.settings_for(stage, "offline", **overrides)
    assert str(e.value).startswith(said), e.value


def test_a_model_list_is_refused_in_one_sentence_by_the_settings_and_the_notebooks_reader():
    "The notebooks read `qa_models` with `role_models` before the settings: the same sentence at both."
    from indicipr.llm import servers as llm_servers
    from indicipr.llm.client import LLMConfigError

    for bad in ("", [["smollm2"]], []):
        with pytest.raises(InputError) as by_settings:
            config.settings_for("llm_qa", "offline", qa_models=bad)
        with pytest.raises(LLMConfigError) as by_reader:
            llm_servers.role_models("qa", bad)
        assert str(by_reader.value) == str(by_settings.value)
    assert llm_servers.role_models("qa", "a, b") == ["a", "b"]


def test_a_number_named_like_a_split_is_a_number():
    "`length_split` (notebook 11: short and long answers, in words) is no split name."
    assert config.settings_for("significance", "offline", length_split=30.0).length_split == 30.0


ROUTE_SPECS = [
    "*=ollama",
    "*=local; gpt-4o=openai",
    "qwen2.5:*=http://gpu1:8000/v1, m=ollama+http://box:11434",
    "m=openai_compatible+https://h/v1",
    {"*": "http://h:1/v1"},
    {"m": {"base_url": "https://h/v1", "api_key_env": "H_KEY"}},
    "gpu1:8000",
    "*=gpu1:8000",
    "=http://h/v1",
    "m=",
    "m=ftp://h",
    "m=weird+http://h",
    "m=replay+http://h",
    {"m": {"url": "http://h"}},
    {"m": 3},
]


@pytest.mark.parametrize("spec", ROUTE_SPECS, ids=str)
def test_the_routes_check_reads_what_the_servers_read(spec):
    "`config.routes_problem` (before any work) refuses exactly the routes `llm.servers.parse_routes` cannot read."
    from indicipr.llm import servers as llm_servers
    from indicipr.llm.client import KINDS

    assert set(core.ENDPOINT_KINDS) == set(KINDS) - {"replay"}
    try:
        llm_servers.parse_routes(spec)
        readable = True
    except llm_servers.LLMConfigError:
        readable = False
    assert (core.routes_problem("parameter llm_endpoints", spec) is None) == readable, spec
