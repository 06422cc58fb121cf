"""The documentation users read matches the code it describes."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from jobs import schemas
from jobs.config import DEFAULT_CONFIG_PATH

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parent.parent


def test_tables_doc_is_generated_from_the_schemas() -> None:
    doc = (ROOT / "docs" / "TABLES.md").read_text()
    assert doc.strip() == schemas.tables_markdown().strip(), "run: python -m jobs.schemas > docs/TABLES.md"


def test_readme_quick_start_is_the_two_make_targets_ci_runs() -> None:
    readme = (ROOT / "README.md").read_text()
    quick = readme.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    commands = re.findall(r"^make (\w+)", quick, flags=re.M)
    assert commands == ["demo", "test"]
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_readme_documents_every_config_key() -> None:
    readme = (ROOT / "README.md").read_text()
    text = DEFAULT_CONFIG_PATH.read_text()
    keys = set(re.findall(r"^([a-z_]+) =", text, flags=re.M))
    missing = sorted(k for k in keys if f"`{k}`" not in readme)
    assert not missing, f"README does not document config keys: {missing}"


def _md_references(text: str) -> set[str]:
    """Relative Markdown links and backticked repository paths (``spec/x.md``, ``conf/y.toml``)."""
    links = {m for m in re.findall(r"\]\(([^)#\s]+)", text) if "://" not in m}
    paths = {m for m in re.findall(r"`([\w./-]+\.(?:md|toml|properties|py|sh))`", text)
             if "/" in m and not m.startswith(("/", "~", "..", "<"))}
    return links | paths


def test_docs_reference_only_files_in_the_repository() -> None:
    # CONTRIBUTING.md points at the contract documents beside the repository on purpose: not checked.
    for doc in ("README.md", "docs/TABLES.md", "CHANGELOG.md"):
        text = (ROOT / doc).read_text()
        base = (ROOT / doc).parent
        missing = sorted(r for r in _md_references(text) if not (base / r).exists() and not (ROOT / r).exists())
        assert not missing, f"{doc} references files not in the repository: {missing}"
    assert "DESIGN.md" not in (ROOT / "docs" / "TABLES.md").read_text()
    assert "spec/detection-rules.md" not in (ROOT / "README.md").read_text()


def test_license_is_the_apache_2_text_pyproject_declares() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert text.lstrip().startswith("Apache License") and "Version 2.0, January 2004" in text
    assert "END OF TERMS AND CONDITIONS" in text and len(text.splitlines()) > 170
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]  # SPDX form (PEP 639)
    assert (ROOT / "CHANGELOG.md").read_text().startswith("# Changelog")


def test_make_clean_removes_what_the_demo_writes() -> None:
    import subprocess

    from jobs.config import default_config

    res = subprocess.run(["make", "-n", "clean"], cwd=ROOT, capture_output=True, text=True, check=True)
    removed = res.stdout.split()
    demo_root = Path(default_config(base_dir=ROOT).output.root).relative_to(ROOT).parts[0]
    for path in (demo_root, "epoch-audit-demo", "epoch-audit-accuracy", "report.html", "dist", "build"):
        assert path in removed, path


def test_readme_explains_the_s_sub_ids_and_the_parquet_trap() -> None:
    readme = (ROOT / "README.md").read_text()
    for sub in ("S1a", "S1b", "S1c", "S1d", "S1e", "S2a", "S2b"):
        assert f"| {sub} |" in readme, sub
    assert "VACUUM" in readme and "as Delta" in readme


def test_one_databricks_dependency_list() -> None:
    """README and notebook install the same packages: pyproject's minus what the runtime ships."""
    import tomllib

    def pip_line(text: str) -> list[str]:
        lines = [ln for ln in text.splitlines() if "%pip install" in ln and "--no-deps" not in ln]
        assert lines, "no %pip install line"
        reqs = {tuple(re.findall(r'"([^"]+)"', ln)) for ln in lines}
        assert len(reqs) == 1, reqs
        return sorted(reqs.pop())

    readme = pip_line((ROOT / "README.md").read_text())
    notebook = pip_line((ROOT / "notebooks" / "epoch_audit_databricks.py").read_text())
    assert readme == notebook
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    runtime = ("pyspark", "pyarrow", "numpy", "pandas", "tomli")
    wanted = sorted(d.split(";")[0].strip() for d in deps if not d.startswith(runtime))
    assert readme == wanted
    nb = (ROOT / "notebooks" / "epoch_audit_databricks.py").read_text()
    assert "Runtime **17.0 or later**" in nb and "17.0 or later" in (ROOT / "README.md").read_text()


def test_the_minimum_versions_ci_installs_are_pyproject_s_floors() -> None:
    """`make test-min` installs .ci/min-versions.txt: each pin is the floor of its range, and every range with a
    floor has its pin (a raised floor left the check testing a release the project no longer admits)."""
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    floors = {}
    for d in deps:
        m = re.match(r"([A-Za-z0-9_.-]+)\s*>=\s*([0-9][^,;\s]*)", d)
        if m and ";" not in d:
            floors[m.group(1).lower().replace("_", "-")] = m.group(2)
    pins = {}
    for line in (ROOT / ".ci" / "min-versions.txt").read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, version = line.split("==")
            pins[name.strip().lower().replace("_", "-")] = version.strip()

    def norm(v: str) -> tuple[int, ...]:
        return tuple(int(x) for x in v.split(".")) + (0,) * (3 - len(v.split(".")))

    assert pins.keys() == floors.keys()
    assert {k: norm(v) for k, v in pins.items()} == {k: norm(v) for k, v in floors.items()}
