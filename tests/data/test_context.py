"""Every stage function takes its run's context and then only the data of earlier stages: a setting (a worker count,
an endpoint, a cost confirmation, a split) is a field of the stage's settings in `indicipr.data.config`, set through
`config.run_context(..., **parameters)`, never an argument beside the context."""

import ast
import importlib
import inspect
import json
import re
from pathlib import Path

import pytest

from indicipr.run.stages import STAGE_FUNCTIONS

# the data a stage receives from earlier stages or cells of its run section: records, scored runs, result rows
DATA_NAMES = {"rows", "runs", "gold_records", "test_records", "records"}


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


# ---------------------------------------------------------------- the run variables
PACKAGE = Path(__file__).resolve().parents[2] / "indicipr"
NOTEBOOKS = PACKAGE.parent / "notebooks"
BELOW_RUN = ("data", "llm", "build", "scoring", "systems", "analysis")  # the floors under `run`
# where a run variable may be read below the `run` floor: the run context's readers, the numerics switch, the
# checkout's and shared/'s folders, needed before any context exists, and the main job's proof, which the write guard
# asks at every write, wherever it happens
READERS = {
    "data.config.run_environment",
    "data.config.run_switches",
    "data.core.project_root",
    "data.core.shared_dir",
    "data.core.main_job_proven",
    "data.core.check_main_job_env",
}
READING_MODULES = {"data.numerics"}


def _run_variable_names() -> set[str]:
    "The constants that name an `INDICIPR_` variable (`STRICT_ENV`, `ENDPOINTS_ENV` …), secrets aside."
    from indicipr.data.basics import SECRET_ENV

    names = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                value = node.value.value
                if isinstance(value, str) and value.startswith("INDICIPR_") and value not in SECRET_ENV:
                    names |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    return names


def _names_a_run_variable(node, constants: set[str]) -> bool:
    from indicipr.data.basics import SECRET_ENV

    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith("INDICIPR_") and node.value not in SECRET_ENV
    return (isinstance(node, ast.Name) and node.id in constants) or (
        isinstance(node, ast.Attribute) and node.attr in constants
    )


def _is_environment(node) -> bool:
    "`os.environ`, or a mapping named `environ`."
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id == "environ"
    )


def run_variable_reads(tree: ast.Module, module: str, constants: set[str]) -> list[str]:
    """`module.function (line n)` of every read of a run variable (`os.environ.get(X)`, `os.getenv(X)`,
    `os.environ[X]`, `environ.get(X)`; X an `INDICIPR_` name or a constant naming one) outside `READERS`."""
    found = []

    def visit(node, function: str):
        for child in ast.iter_child_nodes(node):
            name = f"{module}.{child.name}" if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)) else function
            key = None
            if isinstance(child, ast.Call) and isinstance(child.func, ast.Attribute) and child.args:
                f = child.func
                if (f.attr == "get" and _is_environment(f.value)) or (
                    f.attr == "getenv" and isinstance(f.value, ast.Name) and f.value.id == "os"
                ):
                    key = child.args[0]
            elif isinstance(child, ast.Subscript) and isinstance(child.ctx, ast.Load) and _is_environment(child.value):
                key = child.slice
            if key is not None and _names_a_run_variable(key, constants):
                if name not in READERS and module not in READING_MODULES:
                    found.append(f"{name} (line {child.lineno})")
            visit(child, name)

    visit(tree, module)
    return found


def test_the_checker_finds_a_run_variable_read():
    tree = ast.parse(
        "import os\nSTRICT_ENV = 'INDICIPR_STRICT'\n"
        "def strict():\n    return os.environ.get(STRICT_ENV, '')\n"
        "def yes(environ):\n    return environ['INDICIPR_YES']\n"
        "def key():\n    return os.getenv('INDICIPR_LLM_API_KEY')\n"  # a secret, read where it is used
        "def root():\n    return os.environ.get('HOME')\n"
    )
    assert run_variable_reads(tree, "data.benchmark", {"STRICT_ENV"}) == [
        "data.benchmark.strict (line 4)",
        "data.benchmark.yes (line 6)",
    ]
    assert run_variable_reads(tree, "data.numerics", {"STRICT_ENV"}) == []


def test_no_run_variable_is_read_below_the_run_floor_but_by_the_run_context():
    """`config.run_environment` (for `config.run_context`) reads the run variables; the lower code gets their values
    from the context or its settings, as arguments. Only the numerics switch and the checkout's folders are read
    elsewhere, and an API key where it is used."""
    constants = _run_variable_names()
    assert {"STRICT_ENV", "ACT_MAP_ENV", "ENDPOINTS_ENV", "TIMEOUT_ENV", "YES_ENV", "MAIN_JOB_ENV"} <= constants
    reads = [
        r
        for floor in BELOW_RUN
        for path in sorted((PACKAGE / floor).glob("*.py"))
        for r in run_variable_reads(ast.parse(path.read_text(encoding="utf-8")), f"{floor}.{path.stem}", constants)
    ]
    assert not reads, f"run variables read outside config.run_environment: {reads}"


# ---------------------------------------------------------------- run sections
EXPORT = re.compile(r"^#\|\s*export", re.M)


def exports_in_run_sections(cells: list[dict]) -> list[int]:
    "The indices of the export cells after the `parameters` cell (the run section): none in a stage notebook."
    tagged = [i for i, c in enumerate(cells) if "parameters" in c.get("metadata", {}).get("tags", [])]
    if not tagged:
        return []
    return [
        i
        for i, c in enumerate(cells)
        if i > tagged[0] and c["cell_type"] == "code" and EXPORT.search("".join(c["source"]))
    ]


def test_the_checker_finds_an_export_cell_in_a_run_section():
    cells = [
        {"cell_type": "code", "metadata": {}, "source": ["#| export\n", "def f(): ...\n"]},
        {"cell_type": "code", "metadata": {"tags": ["parameters"]}, "source": ["x = 1\n"]},
        {"cell_type": "code", "metadata": {}, "source": ["#| notest\n", "f()\n"]},
        {"cell_type": "code", "metadata": {}, "source": ["#| export\n", "def g(): ...\n"]},
    ]
    assert exports_in_run_sections(cells) == [3]


def test_no_export_cell_in_a_run_section():
    "A run section only calls, renders and asserts: what it calls is exported above its `parameters` cell."
    found = {
        nb.stem: idx
        for nb in sorted(NOTEBOOKS.glob("*.ipynb"))
        if (idx := exports_in_run_sections(json.loads(nb.read_text(encoding="utf-8"))["cells"]))
    }
    assert not found, f"export cells after the parameters cell: {found}"
