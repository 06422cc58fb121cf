"""The two packages keep to their jobs: epochlib imports neither pyspark nor deltalake."""

from __future__ import annotations

import subprocess
import sys

MODULES = ["epochlib", "epochlib.coordinator", "epochlib.protocol", "epochlib.records", "epochlib.checkpoint",
           "epochlib.dumps", "epochlib.offsets_log", "epochlib.pcap", "epochlib.lineage", "epochlib.rules", "epochlib.sim"]


def test_epochlib_imports_no_spark_or_delta() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'deltalake', 'py4j'))\n"
              "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"epochlib pulled in: {out.stdout.strip()}"


def test_cli_module_imports_without_spark() -> None:
    """`epoch-audit decode` and `--help` must not pay for a JVM or pyspark import."""
    code = "import sys, jobs.cli, jobs.decode\nprint(any(m.startswith('pyspark') for m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# ------------------------------------------------------------------------ imports between modules

import ast  # noqa: E402
from pathlib import Path  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
#: Both packages are held to "no import cycles" (private imports across packages: test_architecture.py).
CHECKED = ("epochlib", "jobs")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(imported module, names) for every import in ``path``, function-level ones included."""
    me = _module_name(path)
    package = me if path.name == "__init__.py" else me.rpartition(".")[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            mod = f"{base}.{node.module}" if node.level and node.module else (node.module or base)
            out.append((mod, [a.name for a in node.names]))
    return out


def _checked_files() -> list[Path]:
    files: list[Path] = []
    for entry in CHECKED:
        p = ROOT / entry
        files += sorted(p.rglob("*.py")) if p.is_dir() else [p]
    return files


def test_no_import_cycles() -> None:
    """Each module can be read without the one that imports it (function-level imports count too)."""
    files = {_module_name(p): p for p in _checked_files()}
    graph: dict[str, set[str]] = {}
    for name, path in files.items():
        deps = set()
        for mod, names in _imports(path):
            for target in [mod, *(f"{mod}.{n}" for n in names)]:
                if target in files and target != name and not name.startswith(target + "."):
                    deps.add(target)
        graph[name] = deps

    def cycle_from(start: str) -> list[str] | None:
        stack, seen = [(start, [start])], set()
        while stack:
            node, path = stack.pop()
            for dep in graph[node]:
                if dep == start:
                    return [*path, start]
                if dep not in seen:
                    seen.add(dep)
                    stack.append((dep, [*path, dep]))
        return None

    cycles = {" -> ".join(c) for c in map(cycle_from, graph) if c}
    assert not cycles, "\n".join(sorted(cycles))
