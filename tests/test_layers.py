"""Each layer imports only layers below it (docs/architecture.md): specs <- records <- cost <- analysis <- sim <- plan
<- calibrate, harness <- cli. Every import counts, lazy and type-only ones included."""

from __future__ import annotations

import ast
from pathlib import Path

import infercast

PACKAGE = Path(infercast.__file__).parent

LAYERS: dict[str, int] = {
    # foundation: no infercast imports beyond each other
    "errors": 0,
    "display": 0,
    "units": 0,
    "files": 0,
    "limits": 0,
    "show": 0,
    "data": 0,
    "specs": 1,
    "records": 2,  # measurement records and one reader per source format: foundation + specs only
    "cost": 3,
    "memory": 3,  # memory: bytes of weights, KV and activations, from specs (cost level)
    "analysis": 4,
    "sim": 5,
    "plan": 6,
    "calibrate": 7,  # predict records, fit profiles, validate by group
    "harness": 7,  # the PyTorch decoder, its timing, and the real engine driven by sim's schedulers
    "cli": 8,
    "ui": 8,  # the web app: on top, beside the CLI (it reuses the CLI's flag names)
    "tutorial_api": 8,
    "__init__": 8,
    "__main__": 8,
}
"""Layer of each top-level module or package of ``infercast`` (higher may import lower or equal)."""
ENTRY_POINTS = ("__main__.py",)
"""``python -m`` entry points are command lines: they may import the CLI."""


def _layer(module: str) -> int:
    top = module.split(".")[1] if module.count(".") else "__init__"
    assert top in LAYERS, f"infercast.{top} has no layer: add it to LAYERS (and docs/architecture.md)"
    return LAYERS[top]


def _imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "infercast":  # `from infercast import sim` imports a layer; other names the facade
                out += [(node.lineno, f"infercast.{a.name}") for a in node.names if a.name in LAYERS]
            else:
                out.append((node.lineno, node.module))
        elif isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
    return [(line, name) for line, name in out if name == "infercast" or name.startswith("infercast.")]


def test_no_module_imports_a_layer_above_its_own():
    upward = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        module = ".".join(rel.parts)
        own = _layer(module.removesuffix(".__init__") if module != "infercast.__init__" else module)
        if path.name in ENTRY_POINTS:
            own = LAYERS["cli"]
        for line, name in _imports(path):
            if name == "infercast":
                continue  # the lazy public facade
            if _layer(name) > own:
                upward.append(f"{rel}.py:{line} imports {name}")
    assert not upward, upward


def test_the_layer_map_covers_the_package():
    tops = {p.stem for p in PACKAGE.glob("*.py")} | {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert tops <= set(LAYERS), sorted(tops - set(LAYERS))


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
    return ".".join(parts)


def _runtime_nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` except the bodies of ``if TYPE_CHECKING:`` blocks (annotations only, never run)."""
    out, todo = [], [tree]
    while todo:
        node = todo.pop()
        out.append(node)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            todo += node.orelse
        else:
            todo += ast.iter_child_nodes(node)
    return out


def _module_imports(path: Path, modules: set[str]) -> set[str]:
    """The infercast modules ``path`` imports when run, lazy imports included, type-only ones not (``from a import
    b``: the module ``a.b`` where it is one, and ``a`` for names that are not modules)."""
    out = set()
    for node in _runtime_nodes(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            subs = {f"{node.module}.{a.name}" for a in node.names} & modules
            out |= subs
            if len(subs) < len(node.names):
                out.add(node.module)
    return out & modules


def test_no_import_cycles_between_modules():
    """No module imports, even lazily, one that imports it back, directly or through others (imports for type
    annotations only do not count): a cycle works only by the order modules happen to load in, or by deferring
    an import, and two such modules are one module in two files."""
    paths = {_module_name(p): p for p in PACKAGE.rglob("*.py")}
    graph = {m: _module_imports(p, set(paths)) - {m} for m, p in paths.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    cycles: list[list[str]] = []

    def visit(m: str) -> None:  # Tarjan's strongly connected components
        index[m] = low[m] = len(index)
        stack.append(m)
        for n in sorted(graph[m]):
            if n not in index:
                visit(n)
                low[m] = min(low[m], low[n])
            elif n in stack:
                low[m] = min(low[m], index[n])
        if low[m] == index[m]:
            component = []
            while True:
                n = stack.pop()
                component.append(n)
                if n == m:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for m in sorted(graph):
        if m not in index:
            visit(m)
    assert not cycles, cycles


def test_no_two_modules_share_a_name():
    """A module's name says which one it is (``sim/blocks.py`` and a ``blocks.py`` elsewhere would not)."""
    names: dict[str, list[str]] = {}
    for path in PACKAGE.rglob("*.py"):
        if path.name not in ("__init__.py", "__main__.py"):
            names.setdefault(path.stem, []).append(str(path.relative_to(PACKAGE)))
    assert not {n: p for n, p in names.items() if len(p) > 1}
