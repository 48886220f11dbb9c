"""The modules of indicipr/ import each other without a cycle (and no module imports itself): the
graph of `from .x`, `from indicipr.x`, `from indicipr import x`, `from . import x` and
`import indicipr.x` imports, function-level ones included, is acyclic. A later notebook's module
may use an earlier one, never the other way round (the evaluate report lives in 11_errors for that); a library
notebook with a letter suffix may sit below its parent (06a_predictions holds the files 06_metrics scores)."""

import ast

from helpers import ROOT

PACKAGE = ROOT / "indicipr"


def modules() -> dict[str, ast.Module]:
    return {
        p.stem: ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
        for p in sorted(PACKAGE.glob("*.py"))
        if p.stem != "__init__"
    }


# `from indicipr.core import load_benchmark` is public API (README): core's module `__getattr__` serves it from
# indicipr.benchmark, a module above core, on first use. That lazy re-export is the one import the graph leaves out.
DOCUMENTED_REEXPORTS = {"core": {"benchmark"}}


def lazy_reexport_imports(tree: ast.Module) -> list[ast.AST]:
    "The import statements inside a module-level `__getattr__` (PEP 562): a re-export on first use, not a dependency."
    return [
        node
        for fn in tree.body
        if isinstance(fn, ast.FunctionDef) and fn.name == "__getattr__"
        for node in ast.walk(fn)
        if isinstance(node, (ast.Import, ast.ImportFrom))
    ]


def imported_modules(tree: ast.Module, known: set[str]) -> set[str]:
    "Package modules a module imports anywhere in its body (top level or inside functions)."
    found = set()
    lazy = {id(n) for n in lazy_reexport_imports(tree)}
    for node in ast.walk(tree):
        if id(node) in lazy:
            continue
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base == "indicipr" or base.startswith("indicipr."):
                name = base.removeprefix("indicipr").lstrip(".")
                if name:
                    found.add(name.split(".")[0])
                else:  # from . import x / from indicipr import x
                    found |= {a.name for a in node.names if a.name in known}
        elif isinstance(node, ast.Import):
            found |= {a.name.split(".")[1] for a in node.names if a.name.startswith("indicipr.")}
    return found & known


def import_graph() -> dict[str, set[str]]:
    trees = modules()
    return {name: imported_modules(tree, set(trees)) for name, tree in trees.items()}


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
        "import os\nfrom .core import x\ndef f():\n    from indicipr.metrics import y\n    from indicipr import error_analysis\n"
        "    import indicipr.stats\n    from . import split\n"
    )
    assert imported_modules(tree, {"core", "metrics", "error_analysis", "stats", "split"}) == {
        "core",
        "metrics",
        "error_analysis",
        "stats",
        "split",
    }


def test_indicipr_import_graph_is_acyclic():
    graph = import_graph()
    assert {"core", "metrics", "error_analysis", "significance"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in indicipr/: " + " -> ".join(cycle)


def test_the_only_lazy_reexport_is_the_documented_one():
    "A module `__getattr__` hands out a name of a module above it for the README's `benchmark.load_benchmark` only."
    lazy = {}
    for name, tree in modules().items():
        for node in lazy_reexport_imports(tree):
            lazy.setdefault(name, set()).update(
                imported_modules(ast.Module(body=[node], type_ignores=[]), set(modules()))
            )
    assert lazy == DOCUMENTED_REEXPORTS
    from indicipr import benchmark

    assert benchmark.load_benchmark is benchmark.load_benchmark


FOUNDATION = ("basics", "core", "numerics", "qa_files", "benchmark", "artifacts")  # from the bottom up


def test_the_foundation_stands_on_the_foundation_only():
    "basics, core, the QA files, the benchmark loader and the artifacts: each imports only the ones below it."
    graph = import_graph()
    for i, name in enumerate(FOUNDATION):
        assert graph[name] <= set(FOUNDATION[:i]), (name, graph[name] - set(FOUNDATION[:i]))


def test_metrics_depends_on_no_later_analysis():
    graph = import_graph()
    assert not graph["metrics"] & {
        "significance",
        "error_analysis",
        "error_taxonomy",
        "bm25",
        "encoders",
        "llm_qa",
        "quality",
    }
    assert "significance" in graph["error_analysis"] and "metrics" in graph["error_analysis"]
    assert (
        "significance" not in graph["error_taxonomy"]
    )  # the classes need no bootstrap: the explorer and the report use them


# Each module keeps its own model display names under this name (the stages' settings are all in indicipr.config);
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
        p.name: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.glob("*.py") if p.name != "_modidx.py"
    }
    over = {k: v for k, v in sizes.items() if v > MAX_MODULE_LINES}
    assert not over, f"modules over {MAX_MODULE_LINES} lines: {over}"


def private_names_used_across(tree: ast.Module, name: str, known: set[str]) -> set[str]:
    "`module._name` references and `from .module import _name` imports of another package module's private names."
    aliases, found = {}, set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = (node.module or "").removeprefix("indicipr").lstrip(".")
            for a in node.names:
                if base in known and base != name and a.name.startswith("_"):
                    found.add(f"{base}.{a.name}")
                if not base and a.name in known:
                    aliases[a.asname or a.name] = a.name
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if node.attr.startswith("_") and not node.attr.startswith("__"):
                found.add(f"{aliases[node.value.id]}.{node.attr}")
    return found


def test_the_checker_finds_private_names_used_across_modules():
    tree = ast.parse("from .core import _x, y\nfrom . import core as c\nc._z\nc.w\n")
    assert private_names_used_across(tree, "metrics", {"core", "metrics"}) == {"core._x", "core._z"}
    assert private_names_used_across(tree, "core", {"core"}) == {"core._z"}


def test_no_module_uses_another_modules_private_names():
    trees = modules()
    used = {name: private_names_used_across(tree, name, set(trees)) for name, tree in trees.items()}
    assert not {k: v for k, v in used.items() if v}, used


def test_the_qa_window_is_defined_once():
    "384, the SQuAD window, is written in `config.WINDOW` and nowhere else (128 also sizes other things, e.g. dense passages)."
    for name, tree in modules().items():
        if name == "config":
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and type(node.value) is int:
                assert node.value != 384, f"{name}: line {node.lineno} writes the window (384) as a literal"


def test_the_foundation_holds_no_runner_report_or_cli():
    trees = modules()
    core = _defined(trees["core"])
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
    assert {"run_pipeline", "run_notebook", "ensure_kernel", "NOTEBOOKS"} <= _defined(trees["runner"])
    assert {"normalize_notebooks", "write_back_outputs", "NOTEBOOK_METADATA"} <= _defined(trees["notebook_files"])
    assert {"main", "build_parser", "COMMANDS"} <= _defined(trees["cli"])
    assert {"write_report", "REPORT_SECTIONS"} <= _defined(trees["report"])
    graph = import_graph()
    assert not {"cli", "runner", "notebook_files", "report"} & graph["core"]
    assert "cli" not in graph["runner"] | graph["notebook_files"]  # the command line is the front, nothing imports it
    assert "argparse" not in {a.name for n in ast.walk(trees["core"]) if isinstance(n, ast.Import) for a in n.names}


LLM_CLIENT = ("llm", "llm_runs", "llm_servers")  # one request, many requests, which server serves which model


def test_the_generation_prompt_and_the_llm_client_live_apart():
    trees = modules()
    client = set().union(*(_defined(trees[m]) for m in LLM_CLIENT))
    generation = _defined(trees["generate"])
    assert {"Endpoint", "chat_json", "ResponseCache", "parse_json_reply"} <= _defined(trees["llm"])
    assert {"run_requests", "cost_estimate"} <= _defined(trees["llm_runs"])
    assert {"llm_config", "open_endpoints", "local_llm_server"} <= _defined(trees["llm_servers"])
    assert not client & {"build_prompt", "SYSTEM_MESSAGE"}
    assert {"build_prompt", "SYSTEM_MESSAGE", "generate_candidates"} <= generation and not generation & {
        "Endpoint",
        "run_requests",
    }
    graph = import_graph()
    assert "generate" not in graph["quality"] | graph["llm_qa"] and "llm" in graph["quality"] & graph["llm_qa"]
    assert not graph["llm"] & {"llm_runs", "llm_servers"}  # the one-request client stands below the other two
    foundation = {"basics", "core", "numerics", "qa_files"}  # the client stands on the foundation alone
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


def test_the_card_numbers_are_not_written_as_literals_elsewhere():
    "10,000 bootstrap resamples is the card's number: `core.CARD` holds it, every other module reads it from there."
    for name, tree in modules().items():
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and node.value == 10_000 and not isinstance(node.value, bool):
                assert name == "core", (
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
