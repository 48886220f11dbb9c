"""The modules of indicipr/ stand on floors, the sub-packages `data`, `llm`, `build`, `scoring`, `systems`, `analysis`
and `run` (in that order): a module imports modules of its own floor and of the floors below, never above, and the
graph of imports (`from .x`, `from ..floor.x`, `from indicipr.floor.x`, `from indicipr.floor import x`,
`import indicipr.floor.x`, function-level ones included) is acyclic. The notebooks read in order: a notebook's name is
its number, its letter and its module's path (`08_systems.encoders.ipynb` exports `indicipr.systems.encoders`), and no
notebook imports, in any cell, the module of a notebook whose name sorts after its own. A module's project imports
stand at its top (in the notebook, its first export cell), relative, as nbdev writes a one-line `from indicipr.x import y`;
one inside a function is lazy on purpose, absolute (nbdev leaves it as written, so the notebook runs it too), and a
comment beside it says why."""

import ast
import io
import json
import re
import tokenize

from helpers import ROOT

PACKAGE = ROOT / "indicipr"
NOTEBOOKS_DIR = ROOT / "notebooks"
FLOORS = ("data", "llm", "build", "scoring", "systems", "analysis", "run")  # from the bottom up


def modules() -> dict[str, ast.Module]:
    "Every module of a floor by its dotted path below `indicipr` (`data.core`)."
    return {
        ".".join(p.relative_to(PACKAGE).with_suffix("").parts): ast.parse(
            p.read_text(encoding="utf-8"), filename=str(p)
        )
        for floor in FLOORS
        for p in sorted((PACKAGE / floor).glob("*.py"))
        if p.stem != "__init__"
    }


def test_the_package_top_holds_the_floors_and_the_entry_only():
    "Outside the floors: the package's `__init__` (the public face), nbdev's index and the old console entry `cli.py`."
    assert {p.name for p in PACKAGE.glob("*.py")} == {"__init__.py", "_modidx.py", "cli.py"}
    entry = ast.parse((PACKAGE / "cli.py").read_text(encoding="utf-8"))
    assert not [n for n in entry.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))]  # it defines nothing
    assert {d.name for d in PACKAGE.iterdir() if (d / "__init__.py").exists()} == {*FLOORS, "lm_eval_tasks"}


def lazy_reexport_imports(tree: ast.Module) -> list[ast.AST]:
    "The import statements inside a module-level `__getattr__` (PEP 562): a re-export on first use, not a dependency."
    return [
        node
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__"
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def _absolute(node: ast.ImportFrom, name: str) -> str:
    "The dotted path below `indicipr` of what `from <module> import` names, read in module `name` (`data.core`)."
    base = node.module or ""
    if node.level:
        package = name.split(".")[: -node.level]
        return ".".join([*package, *([base] if base else [])])
    return base.removeprefix("indicipr").lstrip(".")


def imported_modules(tree: ast.Module, known: set[str], name: str = "") -> set[str]:
    "Package modules a module imports anywhere in its body (top level or inside functions)."
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if not (node.level or node.module == "indicipr" or (node.module or "").startswith("indicipr.")):
                continue
            base = _absolute(node, name)
            found |= {base} | {f"{base}.{a.name}".lstrip(".") for a in node.names}
        elif isinstance(node, ast.Import):
            for a in node.names:
                if a.name.startswith("indicipr."):
                    parts = a.name.split(".")[1:]
                    found |= {".".join(parts[:i]) for i in range(1, len(parts) + 1)}
    return found & known


def import_graph() -> dict[str, set[str]]:
    trees = modules()
    return {name: imported_modules(tree, set(trees), name) for name, tree in trees.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    "One cycle of the graph as a path `[a, b, ..., a]`, or None."
    state, stack = {}, []

    def visit(node):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"
        stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_checker_finds_cycles_and_function_level_imports():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    tree = ast.parse(
        "import os\nfrom ..data.core import x\ndef f():\n    from indicipr.scoring.metrics import y\n"
        "    from indicipr.analysis import error_analysis\n    import indicipr.build.stats\n    from . import split\n"
        "    from .filters import z\n"
    )
    known = {"data.core", "scoring.metrics", "analysis.error_analysis", "build.stats", "build.split", "build.filters"}
    assert imported_modules(tree, known, "build.corpus") == known


def test_indicipr_import_graph_is_acyclic():
    graph = import_graph()
    assert {"data.core", "scoring.metrics", "analysis.error_analysis", "analysis.significance"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in indicipr/: " + " -> ".join(cycle)


def test_a_module_imports_its_floor_and_the_floors_below_only():
    for name, deps in import_graph().items():
        floor = FLOORS.index(name.split(".")[0])
        above = {d for d in deps if FLOORS.index(d.split(".")[0]) > floor}
        assert not above, f"{name} imports a higher floor: {sorted(above)}"


def test_no_module_hands_out_names_lazily():
    "No module `__getattr__` serves a module above it: the package top (`indicipr/__init__.py`) is the public face."
    lazy = {name for name, tree in modules().items() if lazy_reexport_imports(tree)}
    assert not lazy, lazy
    import indicipr
    from indicipr.data.benchmark import load_benchmark
    from indicipr.scoring.metrics import score_predictions

    assert indicipr.load_benchmark is load_benchmark and indicipr.score_predictions is score_predictions


FOUNDATION = ("data.basics", "data.core", "data.numerics", "data.qa_files", "data.benchmark", "data.artifacts")


def test_the_foundation_stands_on_the_foundation_only():
    "basics, core, numerics, the QA files, the benchmark loader and the artifacts: each imports only the ones below it."
    graph = import_graph()
    for i, name in enumerate(FOUNDATION):
        assert graph[name] <= set(FOUNDATION[:i]), (name, graph[name] - set(FOUNDATION[:i]))


def test_metrics_depends_on_no_later_analysis():
    graph = import_graph()
    assert not graph["scoring.metrics"] & {
        "analysis.significance",
        "analysis.error_analysis",
        "analysis.error_taxonomy",
        "systems.bm25",
        "systems.encoders",
        "systems.llm_qa",
        "analysis.quality",
    }
    assert {"scoring.bootstrap", "scoring.metrics"} <= graph["analysis.error_analysis"]
    # the classes need no bootstrap: the explorer and the report use them
    assert not {"analysis.significance", "scoring.bootstrap"} & graph["analysis.error_taxonomy"]


# ---------------------------------------------------------------- the notebooks, in reading order
def notebook_modules() -> dict[str, str]:
    "Notebook name (no suffix) → the module path its `#| default_exp` names."
    out = {}
    for p in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        cells = json.loads(p.read_text(encoding="utf-8"))["cells"]
        exp = [m.group(1) for c in cells if (m := re.match(r"#\| default_exp ([\w.]+)", "".join(c["source"])))]
        if exp:
            out[p.name.removesuffix(".ipynb")] = exp[0]
    return out


def notebook_imports(path) -> set[str]:
    "The package modules any code cell of a notebook imports (magics and shell lines left out)."
    known, found = set(modules()), set()
    for c in json.loads(path.read_text(encoding="utf-8"))["cells"]:
        if c["cell_type"] != "code":
            continue
        code = "\n".join(line for line in "".join(c["source"]).splitlines() if not line.lstrip().startswith(("%", "!")))
        found |= imported_modules(ast.parse(code), known)
    return found


def test_a_notebook_is_named_after_its_module():
    "`NN[x]_<module path>.ipynb`; the stage notebooks are the runner's fourteen, in order, each with its card number."
    from indicipr.run.runner import NOTEBOOKS

    mods = notebook_modules()
    assert set(mods.values()) == set(modules()), set(modules()) ^ set(mods.values())
    for nb, mod in mods.items():
        assert re.fullmatch(r"\d\d[a-z]?_" + re.escape(mod), nb), nb
    assert set(NOTEBOOKS) <= set(mods) and len(NOTEBOOKS) == 14 and NOTEBOOKS == sorted(NOTEBOOKS)
    numbers = [nb[:2] for nb in NOTEBOOKS]
    assert numbers == [f"{i:02d}" for i in range(10)] + ["09", "10", "11", "12"]
    assert all(re.fullmatch(r"\d\d[a-z]", nb.split("_")[0]) for nb in set(mods) - set(NOTEBOOKS))


def test_the_notebooks_read_in_order():
    "Reading the notebooks in name order never meets a module of a notebook not read yet, in any cell."
    mods = notebook_modules()
    home = {mod: nb for nb, mod in mods.items()}
    later = {}
    for nb in mods:
        ahead = {home[m] for m in notebook_imports(NOTEBOOKS_DIR / f"{nb}.ipynb") if home[m] > nb}
        if ahead:
            later[nb] = sorted(ahead)
    assert not later, f"notebooks that import a later notebook's module: {later}"


def test_the_floors_read_in_order():
    "The notebooks of a floor follow those of the floor below: the floors are the chapters."
    floors = [mod.split(".")[0] for _, mod in sorted(notebook_modules().items())]
    chapters = [f for i, f in enumerate(floors) if i == 0 or floors[i - 1] != f]
    assert chapters == list(FLOORS), chapters


# Each module keeps its own model display names under this name (the stages' settings are all in indicipr.data.config);
# any other public name means one thing in one module.
PER_MODULE_CONVENTIONS = {"CARD_NAMES"}


def public_names(tree: ast.Module) -> list[str]:
    "The names of a module's `__all__` (what nbdev exported as public)."
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def test_a_public_name_is_defined_in_one_module():
    "No twin like a `core.act_key(qid)` beside a `quality.act_key(record)`: same name, other meaning."
    owners: dict[str, list[str]] = {}
    for module, tree in modules().items():
        for name in public_names(tree):
            owners.setdefault(name, []).append(module)
    twins = {n: m for n, m in owners.items() if len(m) > 1 and n not in PER_MODULE_CONVENTIONS}
    assert not twins, f"public names defined in more than one module: {twins}"


# ---------------------------------------------------------------- the floors
def _defined(tree: ast.Module) -> set[str]:
    "Names a module defines at its top level (functions, classes, assignments)."
    out = set()
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            out.add(node.name)
        elif isinstance(node, ast.Assign):
            out |= {t.id for t in node.targets if isinstance(t, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            out.add(node.target.id)
    return out


MAX_MODULE_LINES = 750  # a module a reader can hold in mind; a bigger one is carved by concern into its own notebook


def test_no_module_over_the_line_limit():
    sizes = {  # nbdev's generated doc-link index `_modidx.py` grows with every module: not a module of the project
        str(p.relative_to(PACKAGE)): len(p.read_text(encoding="utf-8").splitlines())
        for p in PACKAGE.rglob("*.py")
        if p.name != "_modidx.py"
    }
    over = {k: v for k, v in sizes.items() if v > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def private_names_used_across(tree: ast.Module, name: str, known: set[str]) -> set[str]:
    "`module._name` references and `from .module import _name` imports of another package module's private names."
    aliases, found = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("indicipr")):
            base = _absolute(node, name)
            for a in node.names:
                if base in known and base != name and a.name.startswith("_"):
                    found.add(f"{base}.{a.name}")
                if f"{base}.{a.name}".lstrip(".") in known:
                    aliases[a.asname or a.name] = f"{base}.{a.name}".lstrip(".")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.add(f"{aliases[node.value.id]}.{node.attr}")
    return found


def test_the_checker_finds_private_names_used_across_modules():
    tree = ast.parse("from .core import _x, y\nfrom . import core as c\nc._z\nc.w\n")
    known = {"data.core", "data.metrics"}
    assert private_names_used_across(tree, "data.metrics", known) == {"data.core._x", "data.core._z"}
    assert private_names_used_across(tree, "data.core", {"data.core"}) == {"data.core._z"}


def test_no_module_uses_another_modules_private_names():
    trees = modules()
    used = {name: private_names_used_across(tree, name, set(trees)) for name, tree in trees.items()}
    assert not {k: v for k, v in used.items() if v}, used


def test_the_qa_window_is_defined_once():
    "384, the SQuAD window, is written in `config.WINDOW` and nowhere else (128 also sizes other things, e.g. dense passages)."
    for name, tree in modules().items():
        if name == "data.config":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                assert node.value != 384, f"{name}: line {node.lineno} writes the window (384) as a literal"


def test_the_foundation_holds_no_runner_report_or_cli():
    trees = modules()
    core = _defined(trees["data.core"])
    assert not core & {
        "run_pipeline",
        "run_notebook",
        "write_report",
        "REPORT_SECTIONS",
        "main",
        "build_parser",
        "NOTEBOOKS",
        "normalize_notebooks",
        "write_back_outputs",
    }
    assert {"run_pipeline", "run_notebook", "ensure_kernel"} <= _defined(trees["run.runner"])
    assert {"NOTEBOOKS", "STAGE_NEEDS", "check_parameters"} <= _defined(trees["run.stages"])
    assert {"normalize_notebooks", "write_back_outputs", "NOTEBOOK_METADATA"} <= _defined(trees["run.notebook_files"])
    assert {"main", "build_parser", "COMMANDS"} <= _defined(trees["run.cli"])
    assert {"write_report", "REPORT_SECTIONS"} <= _defined(trees["run.report"])
    graph = import_graph()
    assert not {"run.cli", "run.runner", "run.stages", "run.notebook_files", "run.report"} & graph["data.core"]
    assert (
        "run.cli" not in graph["run.runner"] | graph["run.notebook_files"]
    )  # the command line is the front, nothing imports it
    assert "argparse" not in {
        a.name for n in ast.walk(trees["data.core"]) if isinstance(n, ast.Import) for a in n.names
    }


LLM_CLIENT = ("llm.client", "llm.runs", "llm.servers")  # one request, many requests, which server serves which model


def test_the_generation_prompt_and_the_llm_client_live_apart():
    trees = modules()
    client = set().union(*(_defined(trees[m]) for m in LLM_CLIENT))
    generation = _defined(trees["build.generate"])
    assert {"Endpoint", "chat_json", "ResponseCache", "parse_json_reply"} <= _defined(trees["llm.client"])
    assert {"run_requests", "cost_estimate"} <= _defined(trees["llm.runs"])
    assert {"llm_config", "open_endpoints", "local_llm_server"} <= _defined(trees["llm.servers"])
    assert not client & {"build_prompt", "SYSTEM_MESSAGE"}
    assert {"build_prompt", "SYSTEM_MESSAGE", "generate_candidates"} <= generation and not generation & {
        "Endpoint",
        "run_requests",
    }
    graph = import_graph()
    assert "build.generate" not in graph["analysis.quality"] | graph["systems.llm_qa"]
    assert "llm.client" in graph["analysis.quality"] & graph["systems.llm_qa"]
    assert not graph["llm.client"] & {"llm.runs", "llm.servers"}  # the one-request client stands below the other two
    foundation = {
        "data.basics",
        "data.core",
        "data.numerics",
        "data.qa_files",
    }  # the client stands on the foundation alone
    for m in LLM_CLIENT:
        assert graph[m] <= foundation | set(LLM_CLIENT), (m, graph[m] - foundation - set(LLM_CLIENT))


def test_the_project_reaches_its_own_modules_by_plain_imports():
    "No `importlib.import_module('indicipr…')` or `__import__('indicipr…')`: the import graph sees every arrow."
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and isinstance(node.func, (ast.Attribute, ast.Name)):
                fn = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
                arg = node.args[0] if node.args else None
                if (
                    fn in ("import_module", "__import__")
                    and isinstance(arg, ast.Constant)
                    and str(arg.value).startswith("indicipr")
                ):
                    raise AssertionError(f"{name}: {fn}({arg.value!r}) hides an import from the graph")


# ---------------------------------------------------------------- one import form, at the top
# lm-eval loads its hooks by file path, outside the package, where a relative import cannot resolve: absolute only
LOADED_BY_PATH = {"lm_eval_tasks/indicipr_qa/utils.py"}


def project_imports(tree: ast.Module) -> list[tuple[ast.stmt, bool]]:
    "Each import of the package in a module, with whether it stands inside a function."
    inside = {
        id(node)
        for fn in ast.walk(tree)
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef))
        for node in ast.walk(fn)
    }
    found = []
    for node in ast.walk(tree):
        ours = (
            isinstance(node, ast.ImportFrom)
            and (node.level or node.module == "indicipr" or (node.module or "").startswith("indicipr."))
        ) or (isinstance(node, ast.Import) and any(a.name.split(".")[0] == "indicipr" for a in node.names))
        if ours:
            found.append((node, id(node) in inside))
    return sorted(found, key=lambda pair: pair[0].lineno)


def import_form_problems(source: str, name: str) -> list[str]:
    """A module-level project import that is not relative, a lazy one (inside a function) that is not absolute or
    has no comment on its line or the line above (the line above a run of lazy imports speaks for the run)."""
    tree = ast.parse(source)
    comments = {
        t.start[0]: t.line for t in tokenize.generate_tokens(io.StringIO(source).readline) if t.type == tokenize.COMMENT
    }
    lines = source.splitlines()
    lazy_lines = {
        line for node, lazy in project_imports(tree) if lazy for line in range(node.lineno, node.end_lineno + 1)
    }
    problems = []
    for node, lazy in project_imports(tree):
        relative = isinstance(node, ast.ImportFrom) and node.level > 0
        if not lazy and not relative:
            problems.append(f"{name}:{node.lineno}: a module-level project import in the absolute form")
        if lazy and relative:
            problems.append(f"{name}:{node.lineno}: a lazy project import in the relative form")
        if lazy:
            above = node.lineno - 1
            while above in lazy_lines:
                above -= 1
            said = any(n in comments for n in range(node.lineno, node.end_lineno + 1)) or (
                above in comments and lines[above - 1].lstrip().startswith("#")
            )
            if not said:
                problems.append(f"{name}:{node.lineno}: a project import inside a function without its reason")
    return problems


def test_the_checker_finds_unexplained_lazy_imports_and_mixed_forms():
    fine = (
        "from ..data.core import CARD\nfrom . import verdict\nif 1:\n    from .report import R\n"
        "def f():\n    from indicipr.run.report import R  # pandas\n"
        "def g():\n    # pandas and torch\n    from indicipr.run import report\n    from indicipr.systems import qa_model\n"
        "    import os\n"
    )
    assert import_form_problems(fine, "m") == []
    bad = (
        "from indicipr.data.core import CARD\nfrom . import verdict\nimport indicipr.run.report\n"
        "def f():\n    from indicipr.run.report import R\n    from .report import S  # why\n"
        "def g():\n    x = 1  # a comment about x\n    from indicipr.run import report\n"
    )
    assert import_form_problems(bad, "m") == [
        "m:1: a module-level project import in the absolute form",
        "m:3: a module-level project import in the absolute form",
        "m:5: a project import inside a function without its reason",
        "m:6: a lazy project import in the relative form",
        "m:9: a project import inside a function without its reason",
    ]


def test_one_import_form_and_lazy_imports_say_why():
    "Module level: relative, as nbdev writes them; inside a function: absolute, with the reason it is lazy beside it."
    problems = []
    for p in sorted(PACKAGE.rglob("*.py")):
        name = str(p.relative_to(PACKAGE))
        if name == "_modidx.py":
            continue
        source = p.read_text(encoding="utf-8")
        if name in LOADED_BY_PATH:
            forms = {isinstance(n, ast.ImportFrom) and n.level > 0 for n, _ in project_imports(ast.parse(source))}
            assert forms == {False}, f"{name}: lm-eval loads it by path, so its project imports are absolute"
            continue
        problems += import_form_problems(source, name)
    assert not problems, "\n".join(problems)


def test_a_notebook_imports_in_its_first_export_cell():
    "A later export cell imports no project module at its top level: the module's imports are read first."
    late, known = {}, set(modules())
    for nb in sorted(NOTEBOOKS_DIR.glob("[0-9]*.ipynb")):
        cells = [
            "".join(c["source"])
            for c in json.loads(nb.read_text(encoding="utf-8"))["cells"]
            if c["cell_type"] == "code" and "".join(c["source"]).startswith("#| export")
        ]
        for i, src in enumerate(cells[1:], 1):
            top = [n for n in ast.parse(src).body if isinstance(n, (ast.Import, ast.ImportFrom))]
            found = imported_modules(ast.Module(body=top, type_ignores=[]), known)
            if found:
                late[f"{nb.stem} export cell {i}"] = sorted(found)
    assert not late, f"project imports below a notebook's first export cell: {late}"


def test_the_card_numbers_are_not_written_as_literals_elsewhere():
    "10,000 bootstrap resamples is the card's number: `core.CARD` holds it, every other module reads it from there."
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == 10_000 and not isinstance(node.value, bool):
                assert name == "data.core", (
                    f"{name}: line {node.lineno} writes 10,000 as a literal (use CARD['significance']['n_resamples'])"
                )


def _module_state(tree: ast.Module) -> set[str]:
    "Module-level names bound to a mutable container (dict, list, set literals or constructors), annotated or not."
    makers = {"dict", "list", "set", "OrderedDict", "defaultdict", "Counter", "deque"}
    out = set()
    for node in tree.body:
        value = node.value if isinstance(node, (ast.Assign, ast.AnnAssign)) else None
        targets = (
            node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(node, ast.AnnAssign) else []
        )
        if isinstance(value, (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)) or (
            isinstance(value, ast.Call) and getattr(value.func, "id", getattr(value.func, "attr", None)) in makers
        ):
            out |= {t.id for t in targets if isinstance(t, ast.Name)}
    return out


def state_changes(tree: ast.Module, name: str) -> list[str]:
    "Where a function rebinds (`global`) or mutates (`.clear()`, `.update()`, `x[k] = …`) a module-level container."
    mutators = {
        "clear",
        "update",
        "append",
        "extend",
        "pop",
        "popitem",
        "setdefault",
        "add",
        "discard",
        "remove",
        "insert",
    }
    state, problems = _module_state(tree), []
    for fn in (n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))):
        local = {a.arg for a in fn.args.args + fn.args.kwonlyargs} | {
            t.id for n in ast.walk(fn) if isinstance(n, ast.Assign) for t in n.targets if isinstance(t, ast.Name)
        }
        for node in ast.walk(fn):
            if isinstance(node, ast.Global):
                problems.append(f"{name}.{fn.name}: global {', '.join(node.names)}")
            target = None
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in mutators:
                target = node.func.value
            elif isinstance(node, (ast.Assign, ast.AugAssign)):
                for t in node.targets if isinstance(node, ast.Assign) else [node.target]:
                    if isinstance(t, ast.Subscript):
                        target = t.value
            if isinstance(target, ast.Name) and target.id in state and target.id not in local:
                problems.append(f"{name}.{fn.name} changes the module-level {target.id} (line {node.lineno})")
    return problems


def test_the_state_checker_finds_what_the_old_act_mapping_did():
    old = ast.parse(
        "_ACT_MAPPING: dict[str, str] = {}\ndef use(m):\n    _ACT_MAPPING.clear()\n    _ACT_MAPPING.update(m)\n"
        "def put(k, v):\n    _ACT_MAPPING[k] = v\ndef fine():\n    M2 = {}\n    M2.update(a=1)\n    return dict(_ACT_MAPPING)\n"
    )
    assert state_changes(old, "x") == [
        "x.use changes the module-level _ACT_MAPPING (line 3)",
        "x.use changes the module-level _ACT_MAPPING (line 4)",
        "x.put changes the module-level _ACT_MAPPING (line 6)",
    ]


def test_no_module_level_state_changes_at_run_time():
    "What a function of the package computes never depends on which function ran before it."
    problems = [p for name, tree in modules().items() for p in state_changes(tree, name)]
    assert not problems, problems


def test_an_export_cell_defines_one_public_name():
    "As in fastcore's notebooks, an export cell defines one public function or class (its private helpers go with it)."
    crowded = {}
    for nb in sorted(NOTEBOOKS_DIR.glob("[0-9]*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            src = "".join(cell["source"])
            if cell["cell_type"] != "code" or not src.startswith("#| export"):
                continue
            public = [
                n.name
                for n in ast.parse(src).body
                if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not n.name.startswith("_")
            ]
            if len(public) > 1:
                crowded[f"{nb.stem} cell {i}"] = public
    assert not crowded, f"export cells defining several public names: {crowded}"
