"""No import cycles inside forecast_dojo: data flows one way (sources -> corpus/events -> env -> agents -> ...)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "forecast_dojo"


def module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of import nodes inside ``if TYPE_CHECKING:`` blocks (type-only, never executed)."""
    skipped: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                for inner in ast.walk(child):
                    skipped.add(id(inner))
    return skipped


def import_graph() -> dict[str, set[str]]:
    """Module -> the forecast_dojo modules it imports anywhere (top level or inside functions)."""
    modules = {module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text())
        skipped = _type_checking_nodes(tree)
        is_package = path.name == "__init__.py"
        for node in ast.walk(tree):
            if id(node) in skipped:
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = name.split(".") if is_package else name.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (node.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                # "from pkg import sub" imports the submodule when one exists, else a name of pkg/__init__
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                # An edge to one's own ancestor package adds nothing: Python runs ``a/__init__`` before
                # ``a.b`` anyway (``forecast_dojo.corpus.importers.wikipedia`` takes ``ImportReport`` from
                # its package, whose loader imports it lazily by name).
                if (
                    target
                    and not name.startswith(target + ".")
                    and target != name
                    and target.startswith("forecast_dojo")
                ):
                    graph[name].add(target)
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt) :] + [nxt]
            if nxt not in state:
                found = visit(nxt)
                if found:
                    return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node)
            if found:
                return found
    return None


def test_the_graph_sees_known_edges():
    graph = import_graph()
    assert "forecast_dojo.records" in graph["forecast_dojo.env"]
    assert "forecast_dojo.env" in graph["forecast_dojo.registration"]  # a lazy import inside make()
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]


def test_no_import_cycle_in_the_package():
    """Module-level and lazy (in-function) imports both count; ``TYPE_CHECKING`` imports do not."""
    cycle = find_cycle(import_graph())
    assert cycle is None, " -> ".join(cycle)


def test_the_architecture_doc_names_modules_that_exist_and_every_subpackage():
    """docs/architecture.md describes the package as it is: each `name.py` / `name/` it names exists."""
    import re

    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"`((?:[a-z_]+/)*[a-z_]+(?:\.py|/))`", text))
    top_level = {"evaluation/", "training/", "examples/", "benchmarks/", "envs/", "corpus/", "tests/"}
    named.discard("forecast_dojo/envs/")  # where the wheel installs envs/
    missing = [
        n for n in sorted(named)
        if not (PACKAGE / n).exists() and not any((PACKAGE / sub / n).exists() for sub in ("corpus", "events", "synthetic", "agents", "evaluation", "training", "corpus/importers"))
        and not (n in top_level or (PACKAGE.parent / n).exists())
    ]  # fmt: skip
    assert not missing, missing
    subpackages = {p.parent.name + "/" for p in PACKAGE.glob("*/__init__.py")}
    assert subpackages <= named, subpackages - named
