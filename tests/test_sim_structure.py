"""The simulator's modules form no import cycle (issue 11): read from the source with ``ast``, counting every
import statement — at module level, inside functions, and under ``TYPE_CHECKING`` — so a cycle cannot
hide behind a lazy import.
"""

from __future__ import annotations

import ast
from pathlib import Path

import epochlib.sim

PKG = "epochlib.sim"
SIM_DIR = Path(epochlib.sim.__file__).parent


def _module_name(path: Path) -> str:
    return PKG if path.stem == "__init__" else f"{PKG}.{path.stem}"


def _imports(path: Path, known: set[str]) -> set[str]:
    """The ``epochlib.sim`` modules that ``path`` names in an import statement."""
    mod = _module_name(path)
    package = mod if path.stem == "__init__" else mod.rsplit(".", 1)[0]
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                base = f"{base}.{node.module}" if node.module else base
            else:
                base = node.module or ""
            # ``from . import x`` / ``from epochlib.sim import x`` may name a submodule
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        else:
            continue
        out |= {t for t in targets if t in known}
    out.discard(mod)
    return out


def _graph(root: Path) -> dict[str, set[str]]:
    files = sorted(root.glob("*.py"))
    known = {_module_name(f) for f in files}
    return {_module_name(f): _imports(f, known) for f in files}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle as a path ``[a, b, ..., a]``, or None."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    path: list[str] = []

    def visit(m: str) -> list[str] | None:
        state[m] = 1
        path.append(m)
        for n in sorted(graph.get(m, ())):
            if state.get(n) == 1:
                return [*path[path.index(n):], n]
            if n not in state and (found := visit(n)):
                return found
        path.pop()
        state[m] = 2
        return None

    for m in sorted(graph):
        if m not in state and (found := visit(m)):
            return found
    return None


def test_sim_modules_import_no_cycle():
    graph = _graph(SIM_DIR)
    assert {"epochlib.sim.engine", "epochlib.sim.incidents", "epochlib.sim.cluster"} <= set(graph)
    assert "epochlib.sim.incidents" in graph["epochlib.sim.engine"]  # the engine drives the incidents ...
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])  # ... which never import it back


def test_cycle_finder_sees_lazy_and_type_checking_imports(tmp_path):
    # the shape issue 11 removed: a mixin importing its engine back, lazily and for type checking only
    (tmp_path / "__init__.py").write_text("")
    (tmp_path / "engine.py").write_text("from .incidents import Incidents\n")
    (tmp_path / "incidents.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .engine import Client\n")
    assert _cycle(_graph(tmp_path)) == ["epochlib.sim.engine", "epochlib.sim.incidents", "epochlib.sim.engine"]
    (tmp_path / "incidents.py").write_text("def f():\n    from . import engine\n")
    assert _cycle(_graph(tmp_path)) == ["epochlib.sim.engine", "epochlib.sim.incidents", "epochlib.sim.engine"]
    (tmp_path / "incidents.py").write_text("from .cluster import Client\n")
    (tmp_path / "cluster.py").write_text("")
    assert _cycle(_graph(tmp_path)) is None


def _engine_members() -> set[str]:
    from epochlib.sim.incidents import Engine

    return set(Engine.__annotations__) | {n for n, v in vars(Engine).items() if callable(v) and not n.startswith("_")}


def _sim_attributes(module: str) -> set[str]:
    """Attributes read through ``self.sim.<x>`` or a local alias ``sim.<x>``."""
    tree = ast.parse((SIM_DIR / module).read_text(encoding="utf-8"))
    via_self = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Attribute)
                and n.value.attr == "sim" and isinstance(n.value.value, ast.Name) and n.value.value.id == "self"}  # fmt: skip
    via_alias = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
                 and n.value.id == "sim"}  # fmt: skip
    return via_self | via_alias


def test_incidents_use_only_the_engine_protocol():
    # the protocol is the whole contract: an incident reaching past it (self.sim.<anything else>) fails here
    used = _sim_attributes("incidents.py")
    assert {"at", "commit_member", "publish", "claim"} <= used
    assert used <= _engine_members(), sorted(used - _engine_members())
    kraft = _sim_attributes("kraft_incidents.py")  # the metadata-log incidents (issue 15) too
    assert {"at", "publish", "capture", "krng", "klog", "hw_seen"} <= kraft
    assert kraft <= _engine_members(), sorted(kraft - _engine_members())


def test_the_engine_implements_the_protocol(tmp_path):
    from epochlib.sim import preset
    from epochlib.sim.engine import Sim

    sim = Sim(preset("demo"), tmp_path)
    sim.setup()
    missing = sorted(n for n in _engine_members() if not hasattr(sim, n))
    sim.truth.close()
    for log in sim.olog.values():
        log.close()
    assert not missing, f"Sim lacks {missing} that incidents rely on"
    assert sim.incidents.sim is sim
