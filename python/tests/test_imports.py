"""No import cycles inside the posenc package: no two of its modules import each other, directly or
through others (python/README.md, "posenc.torch.distributed").

The graph is read from the source files with ast, so every import counts, the ones inside functions
included. An import of a name from a package counts as an import of that package's __init__ unless
the name is a module of the package. The implied import of a module's parent packages is not an
edge: Python loads a parent before its children, and `posenc.torch` loading `posenc.torch._context`
is the edge that matters.
"""
import ast

from conftest import ROOT

PACKAGE = ROOT / "python" / "posenc"


def module_name(path):
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def modules():
    """{dotted name: path} of every Python module of the package; an extension module
    (posenc._posenc) is known by its stub (.pyi) and imports nothing of the package."""
    found = {module_name(p): p for p in PACKAGE.rglob("*.py") if "__pycache__" not in p.parts}
    stubs = {module_name(p): None for p in PACKAGE.rglob("*.pyi")}
    return {**stubs, **found}


def imports_of(name, path, known):
    """The package's modules that module `name` imports."""
    is_package = path.name == "__init__.py"
    here = name if is_package else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = here
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            if node.level:
                base = ".".join(x for x in (base, node.module or "") if x)
            else:
                base = node.module
            targets = []
            for a in node.names:
                sub = f"{base}.{a.name}"
                targets.append(sub if sub in known else base)
        else:
            continue
        found.update(t for t in targets if t in known and t != name)
    return found


def cycle(graph):
    """One import cycle as a list of module names, or None."""
    state = {}

    def visit(node, stack):
        state[node] = "open"
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == "open":
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state:
                found = visit(nxt, stack)
                if found:
                    return found
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state:
            found = visit(node, [])
            if found:
                return found
    return None


def test_posenc_has_no_import_cycle():
    known = modules()
    graph = {name: imports_of(name, path, known) if path else set() for name, path in known.items()}
    assert "posenc._posenc" in graph["posenc._absolute"]
    assert "posenc.torch.distributed" in graph and "posenc.torch._context" in graph
    # The graph is read correctly: the edges the package is built on are present.
    assert "posenc.torch._context" in graph["posenc.torch.distributed"]
    assert "posenc.torch.distributed" in graph["posenc.torch"]
    assert "posenc" in graph["posenc.torch._context"]
    found = cycle(graph)
    assert found is None, "import cycle: " + " -> ".join(found)


def test_cycle_finder_finds_a_planted_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}
    assert cycle(graph) == ["a", "b", "c", "a"]
    assert cycle({"a": {"b"}, "b": set()}) is None


def test_relative_imports_resolve(tmp_path):
    known = {"posenc", "posenc.torch", "posenc.torch._context", "posenc._posenc"}
    init = tmp_path / "__init__.py"
    init.write_text("from . import _context\nfrom .. import _posenc\nimport posenc as _pe\n")
    assert imports_of("posenc.torch", init, known) == {"posenc.torch._context", "posenc._posenc",
                                                       "posenc"}
    mod = tmp_path / "m.py"
    mod.write_text("from . import torch as _pt\n")
    assert imports_of("posenc.m", mod, known) == {"posenc.torch"}
