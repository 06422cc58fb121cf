"""The Databricks install path, tested: build the wheel, `pip install --no-deps` it into a clean venv (the
dependencies come separately, as on a cluster whose runtime ships them), and use it from there."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SKIP = shutil.ignore_patterns(".git", ".venv", ".venv-min", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                              ".ruff_cache", ".hypothesis", "epoch-audit-*", "tests", "bench")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.mark.slow
def test_wheel_installs_with_no_deps_into_a_clean_venv(tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=SKIP, symlinks=True)  # never build inside the checkout
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-v", "-w", str(dist), str(src)],
                           capture_output=True, text=True, env=_clean_env(), timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    assert "project.license" not in build.stdout + build.stderr  # setuptools' deprecation of the table form
    wheel = next(dist.glob("epoch_audit-*-py3-none-any.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    meta = zipfile.ZipFile(wheel).read("epoch_audit-0.1.0.dist-info/METADATA").decode()
    assert "License-Expression: Apache-2.0" in meta and "epoch_audit-0.1.0.dist-info/licenses/LICENSE" in names
    for data in ("jobs/local.toml", "jobs/nightly.example.toml", "jobs/databricks.example.toml",
                 "jobs/log4j2.properties", "jobs/cli.py", "epochlib/__init__.py"):
        assert data in names, data
    assert not any(n.startswith("tests/") for n in names)

    env_dir = tmp_path / "clean"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    py = env_dir / "bin" / "python"
    pip = subprocess.run([str(py), "-m", "pip", "install", "-q", "--no-deps", str(wheel)], capture_output=True,
                         text=True, env=_clean_env(), timeout=300)
    assert pip.returncode == 0, pip.stderr[-3000:]
    # Nothing but the wheel is installed: the package imports without pulling anything in.
    listed = subprocess.run([str(py), "-m", "pip", "list", "--format=freeze"], capture_output=True, text=True,
                            env=_clean_env(), check=True).stdout
    assert "epoch-audit==0.1.0" in listed and "pyspark" not in listed

    # The dependencies, as a runtime provides them: this interpreter's site-packages, after the venv's own.
    site = env_dir / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    (site / "zz_runtime.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    work = tmp_path / "work"
    work.mkdir()

    def run(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(args, capture_output=True, text=True, env=_clean_env(), cwd=work, timeout=120)

    where = run(str(py), "-c", "import jobs, epochlib; print(jobs.__file__); print(epochlib.__file__)")
    assert where.returncode == 0, where.stderr
    assert all(line.startswith(str(site)) for line in where.stdout.split()), where.stdout
    script = env_dir / "bin" / "epoch-audit"
    assert run(str(script), "--version").stdout.strip().endswith("0.1.0")
    init = run(str(script), "init", "prod.toml", "--example", "databricks")
    assert init.returncode == 0, init.stderr
    loaded = run(str(py), "-c", "from jobs.config import load_config; print(load_config('prod.toml').output.catalog)")
    assert loaded.stdout.strip() == "kafka", loaded.stderr
    (work / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n3 17\n")
    decoded = run(str(script), "decode", "leader-epoch-checkpoint")
    assert decoded.returncode == 0 and '"epoch":3,"start_offset":17' in decoded.stdout, decoded.stderr
