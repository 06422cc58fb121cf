"""Package boundaries: nothing outside ``epochlib`` reaches into its private names.

``jobs`` (and the benchmarks and the notebook) may use only what ``epochlib`` makes public: no module
whose dotted path has a part starting with ``_`` (``epochlib._wire``, ``epochlib.rules._model``), no name
starting with ``_`` imported from ``epochlib`` (``from epochlib.rules.resets import _classify_rewind``),
and no ``_name`` attribute read off an imported ``epochlib`` module (``records._decode(...)``). Dunders
(``epochlib.__version__``) are public. If ``jobs`` needs something private, make it public with a proper
name and docstring in ``epochlib`` instead.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
CHECKED = ("jobs", "bench", "notebooks")


def _private(part: str) -> bool:
    return part.startswith("_") and not (part.startswith("__") and part.endswith("__"))


def _is_epochlib(module: str | None) -> bool:
    return module is not None and (module == "epochlib" or module.startswith("epochlib."))


def private_epochlib_uses(source: str, filename: str = "<src>") -> list[str]:
    """Every use of a private ``epochlib`` module or name in ``source``, as ``file:line: what``."""
    tree = ast.parse(source, filename)
    found: list[str] = []
    bound: set[str] = set()  # local names that may be epochlib modules

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', '?')}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if not _is_epochlib(a.name):
                    continue
                if any(_private(p) for p in a.name.split(".")):
                    report(node, f"import {a.name}")
                bound.add(a.asname or a.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _is_epochlib(node.module):
            assert node.module is not None
            if any(_private(p) for p in node.module.split(".")):
                report(node, f"from {node.module} import {', '.join(a.name for a in node.names)}")
                continue
            for a in node.names:
                if _private(a.name):
                    report(node, f"from {node.module} import {a.name}")
                bound.add(a.asname or a.name)
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in bound:
                report(node, f"{ast.unparse(node)}")
    return found


@pytest.mark.parametrize(
    "source",
    [
        "from epochlib.rules.resets import _classify_rewind",
        "from epochlib.rules._model import finding_id",
        "import epochlib._wire",
        "import epochlib._compression as comp",
        "from epochlib import _schema",
        "from epochlib import records\nrecords._decode_batch(b'')",
        "import epochlib.rules\nepochlib.rules.fencing._rounds([], 0)",
        "def f():\n    from epochlib.rules.resets import _log_start\n    return _log_start",
    ],
)
def test_the_check_sees_every_import_form(source: str) -> None:
    assert private_epochlib_uses(source), source


@pytest.mark.parametrize(
    "source",
    [
        "from epochlib.rules import SnapshotRounds, check_partition_commits",
        "import epochlib\nepochlib.__version__",
        "from . import _frames as fr\nfr._col",
        "from jobs.reports import _frames",
        "import epochlib.rules as r\nr.leader_of_round([])",
    ],
)
def test_public_uses_pass(source: str) -> None:
    assert private_epochlib_uses(source) == []


def test_no_private_epochlib_imports_outside_epochlib() -> None:
    files = [p for d in CHECKED for p in sorted((ROOT / d).rglob("*.py"))]
    assert any(p.parts[-2] == "reports" for p in files)  # the walk found the jobs package
    violations = [v for p in files for v in private_epochlib_uses(p.read_text(), str(p.relative_to(ROOT)))]
    assert not violations, "private epochlib names used outside epochlib (make them public there):\n" + "\n".join(
        violations
    )
