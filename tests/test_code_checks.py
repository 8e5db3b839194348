"""The checks engineers lean on, run with the suite so CI fails when one finds something: the
direction of imports (import-linter's contracts in pyproject.toml), ruff, mypy, and the size of
modules (one reading should hold one)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
#: Past this a module stops fitting one reading (style.md: split before 600, aim under 400).
MODULE_LINES_MAX = 400
APP_LINES_MAX = 200


#: import-linter's command, from this environment's Python, with the tree in question importable.
LINT_IMPORTS = "import sys; sys.path.insert(0, '.'); from importlinter.cli import lint_imports; sys.exit(lint_imports())"


def run(*command: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """A tool of this environment, by module, so it is found whether or not the venv is activated."""
    return subprocess.run([sys.executable, *command], cwd=cwd, capture_output=True, text=True, timeout=600, check=False)


def test_imports_point_one_way():
    """handlers -> core packages in their order -> base and store; store and the base import no capability."""
    result = run("-c", LINT_IMPORTS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_contracts_catch_an_import_pointing_the_wrong_way(tmp_path):
    """The contracts are not vacuous: a store module importing a capability breaks one."""
    for folder in ("core", "handlers", "store"):
        shutil.copytree(ROOT / folder, tmp_path / folder)
    shutil.copy(ROOT / "pyproject.toml", tmp_path)
    (tmp_path / "store" / "wrong_way.py").write_text("from core.domains import operations\n")
    result = run("-c", LINT_IMPORTS, cwd=tmp_path)
    assert result.returncode != 0
    assert "store.wrong_way -> core.domains.operations" in result.stdout


def test_ruff_finds_nothing():
    result = run("-m", "ruff", "check", "--no-cache", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing():
    """With the configuration in pyproject.toml: strict on core/ and store/."""
    result = run("-m", "mypy")
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("folder", ["core", "store", "handlers"])
def test_no_module_is_over_the_size_budget(folder):
    sizes = {str(p.relative_to(ROOT)): len(p.read_text().splitlines()) for p in (ROOT / folder).rglob("*.py")}
    assert {name: lines for name, lines in sizes.items() if lines > MODULE_LINES_MAX} == {}


def test_app_py_stays_a_composition_root():
    assert len((ROOT / "app.py").read_text().splitlines()) < APP_LINES_MAX


def test_the_port_is_bound_before_the_service_is_imported(tmp_path):
    """Start-up to listening is mostly importing (issue 41): app.py binds with the configuration
    and the socket code alone, and imports handlers/ and the store once the port listens."""
    config = tmp_path / "service.toml"
    config.write_text(f'[server]\nport = 0\n[storage]\npath = "{tmp_path / "db.sqlite3"}"\n')
    script = ("import sys, app; app.bind(app.load(app.cli.parse_args(['--config', sys.argv[1]]), serving=True)).close(); "
              "print(sorted({m.split('.')[0] for m in sys.modules} & {'handlers', 'store', 'sqlite_utils', 'dns'}))")
    done = run("-c", script, str(config))
    assert (done.returncode, done.stdout.strip()) == (0, "[]"), done.stderr
