"""The documentation users read matches the code it describes."""

from __future__ import annotations

import re
from pathlib import Path

from jobs import schemas
from jobs.config import DEFAULT_CONFIG_PATH

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
