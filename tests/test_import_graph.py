"""The modules of indicipr/ import each other without a cycle (and no module imports itself): the
graph of `from .x`, `from indicipr.x`, `from indicipr import x`, `from . import x` and
`import indicipr.x` imports, function-level ones included, is acyclic. A later notebook's module
may use an earlier one, never the other way round (the evaluate report lives in 11_errors for that)."""
import ast

from helpers import ROOT

PACKAGE = ROOT / "indicipr"


def modules() -> dict[str, ast.Module]:
    return {p.stem: ast.parse(p.read_text(encoding="utf-8"), filename=str(p))
            for p in sorted(PACKAGE.glob("*.py")) if p.stem != "__init__"}


def imported_modules(tree: ast.Module, known: set[str]) -> set[str]:
    "Package modules a module imports anywhere in its body (top level or inside functions)."
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level == 1 or base == "indicipr" or base.startswith("indicipr."):
                name = base.removeprefix("indicipr").lstrip(".")
                if name:
                    found.add(name.split(".")[0])
                else:                                    # from . import x / from indicipr import x
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
        state[node] = "open"; stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        state[node] = "done"; stack.pop()
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_checker_finds_cycles_and_function_level_imports():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"a"}}) == ["a", "a"]
    assert find_cycle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    tree = ast.parse("import os\nfrom .core import x\ndef f():\n    from indicipr.metrics import y\n    from indicipr import errors\n"
                     "    import indicipr.stats\n    from . import split\n")
    assert imported_modules(tree, {"core", "metrics", "errors", "stats", "split"}) == {"core", "metrics", "errors", "stats", "split"}


def test_indicipr_import_graph_is_acyclic():
    graph = import_graph()
    assert {"core", "metrics", "errors", "significance"} <= set(graph)
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle in indicipr/: " + " -> ".join(cycle)


def test_metrics_depends_on_no_later_analysis():
    graph = import_graph()
    assert not graph["metrics"] & {"significance", "errors", "bm25", "encoders", "llm_qa", "quality"}
    assert "significance" in graph["errors"] and "metrics" in graph["errors"]


# Each module keeps its own profile defaults and model display names under these names (core.stage_settings
# reads `PROFILE_DEFAULTS` of the module at hand); any other public name means one thing in one module.
PER_MODULE_CONVENTIONS = {"PROFILE_DEFAULTS", "CARD_NAMES"}


def public_names(tree: ast.Module) -> list[str]:
    "The names of a module's `__all__` (what nbdev exported as public)."
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return list(ast.literal_eval(node.value))
    return []


def test_a_public_name_is_defined_in_one_module():
    "No twin like `core.act_key(qid)` beside `quality.act_key(record)`: same name, other meaning."
    owners: dict[str, list[str]] = {}
    for module, tree in modules().items():
        for name in public_names(tree):
            owners.setdefault(name, []).append(module)
    twins = {n: m for n, m in owners.items() if len(m) > 1 and n not in PER_MODULE_CONVENTIONS}
    assert not twins, f"public names defined in more than one module: {twins}"
