"""The package's layout rules (README, "Layout"): folders by stage, imports pointing down the
stages, no cycle (not even a type-only one), no private name taken from another folder. Read
from the source with ``ast``: nothing is imported."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "fastonnx"

# The stages, lowest first: a module may import from its own stage and the ones before it.
# ``errors`` and the native ``_C`` sit below every stage; ``__init__`` and ``__main__`` above.
STAGES = ("core", "dynamic", "converters", "weights", "frontends", "lowering", "pipeline", "integrations")
BOTTOM = {"errors", "_C"}
TOP = {"", "__main__"}


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _stage(module: str) -> int:
    head = module.split(".")[0]
    if module in TOP:
        return len(STAGES)
    if head in BOTTOM:
        return -1
    assert head in STAGES, f"fastonnx.{module} sits in no stage folder: move it into one of {STAGES}"
    return STAGES.index(head)


def _imports(module: str) -> list[tuple[str, list[str], int]]:
    """(imported module, names taken from it, line) of every import of the package's own modules,
    type-only and function-local ones included."""
    path = MODULES[module]
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    if module == "":
        package = []
    out = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            elif node.module and (node.module == "fastonnx" or node.module.startswith("fastonnx.")):
                target = node.module.removeprefix("fastonnx").lstrip(".")
            else:
                continue
            names = [a.name for a in node.names]
            submodules = [
                f"{target}.{n}".lstrip(".") for n in names if f"{target}.{n}".lstrip(".") in MODULES | {"_C": 0}
            ]
            if submodules:
                out += [(m, [], node.lineno) for m in submodules]
            else:
                out.append((target, names, node.lineno))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "fastonnx" or alias.name.startswith("fastonnx."):
                    out.append((alias.name.removeprefix("fastonnx").lstrip("."), [], node.lineno))
    return out


def _folder(module: str) -> str:
    return module.rpartition(".")[0] if MODULES.get(module, Path()).name != "__init__.py" else module


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "fastonnx")
def test_imports_point_down_the_stages(module):
    for target, _, line in _imports(module):
        if target == module:
            continue
        assert _stage(target) <= _stage(module), (
            f"{MODULES[module]}:{line} imports fastonnx.{target}, a later stage ({STAGES} in order)"
        )


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "fastonnx")
def test_private_names_stay_in_their_folder(module):
    for target, names, line in _imports(module):
        if _folder(target) == _folder(module) or target == "_C":
            continue
        private = [n for n in names if n.startswith("_") and not n.startswith("__")]
        assert not private, f"{MODULES[module]}:{line} takes {private} from fastonnx.{target}, another folder"
        leaf = target.rpartition(".")[2]
        assert not leaf.startswith("_") or target in BOTTOM, (
            f"{MODULES[module]}:{line} imports the private module fastonnx.{target} from another folder"
        )


def test_no_import_cycles():
    graph = {m: {t for t, _, _ in _imports(m) if t in MODULES and t != m} for m in MODULES}
    # The package's __init__ is imported by every submodule's import; its own imports are the API.
    graph[""] = set()
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(m: str, stack: list[str]) -> None:
        state[m] = 1
        stack.append(m)
        for t in sorted(graph[m]):
            if state.get(t) == 1:
                cycles.append([*stack[stack.index(t) :], t])
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[m] = 2

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    assert not cycles, "import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def test_import_fastonnx_imports_no_torch():
    """``python -m fastonnx inspect`` and ``verify`` need no torch: the package imports its API
    when it is first used."""
    import subprocess
    import sys

    code = "import sys, fastonnx, fastonnx.__main__; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.parametrize("module", sorted(MODULES), ids=lambda m: m or "fastonnx")
def test_modules_and_classes_stay_small(module):
    """No module over 800 lines and no class over 400: past that a file holds several concerns."""
    text = MODULES[module].read_text()
    assert text.count("\n") <= 800, f"{MODULES[module]} has {text.count(chr(10))} lines: split it by concern"
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.ClassDef):
            lines = node.end_lineno - node.lineno + 1
            assert lines <= 400, f"{MODULES[module]}:{node.lineno} class {node.name} has {lines} lines: split it"
