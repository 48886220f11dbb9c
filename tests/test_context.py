"""Every stage function takes its run's context and then only the data of earlier stages: a setting (a worker count,
an endpoint, a cost confirmation, a split) is a field of the stage's settings in `indicipr.data.config`, set through
`config.run_context(..., **parameters)`, never an argument beside the context."""

import importlib
import inspect

import pytest

from indicipr.run.runner import STAGE_FUNCTIONS

# the data a stage receives from earlier stages or cells of its run section: records, scored runs, result rows, the
# audit kit's folder that the stage writes and reads back
DATA_NAMES = {"rows", "runs", "gold_records", "test_records", "records", "kit"}


def _function(spec: str):
    module, name = spec.split(":")
    return getattr(importlib.import_module(module), name)


def settings_beside_context(fn) -> list[str]:
    "The parameters of `fn` after its first (`ctx`) that are not data of earlier stages: a default, or another name."
    params = list(inspect.signature(fn).parameters.values())
    if not params or params[0].name != "ctx":
        return ["(first parameter is not ctx)"]
    return [
        p.name
        for p in params[1:]
        if p.default is not inspect.Parameter.empty
        or p.kind not in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        or p.name not in DATA_NAMES
    ]


@pytest.mark.parametrize("spec", STAGE_FUNCTIONS)
def test_a_stage_function_takes_its_context_and_data_only(spec):
    assert settings_beside_context(_function(spec)) == [], spec


def test_a_setting_beside_the_context_is_found():
    def run_encoders(ctx, workers=None): ...

    def errors_stage(ctx, runs, gold_records, length_split): ...

    def judge_stage(ctx, records, **options): ...

    assert settings_beside_context(run_encoders) == ["workers"]
    assert settings_beside_context(errors_stage) == ["length_split"]
    assert settings_beside_context(judge_stage) == ["options"]
    assert settings_beside_context(lambda settings: None) == ["(first parameter is not ctx)"]
