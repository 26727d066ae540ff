"""The package layering docs/architecture.md describes, read from the source's imports.
The whole graph is import-linter's job (pyproject.toml's [tool.importlinter], run by
.ci/lint-imports); the checks here read single files and plant violations to show that the
contracts catch them."""

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {  # import name -> folder
    "itsmreview.catalog": ROOT / "catalog",
    "itsmreview.accounts": ROOT / "accounts",
    "itsmreview.review": ROOT / "review",
    "itsmreview.coverage": ROOT / "coverage",
    "itsmreview.ledger": ROOT / "ledger",
    "itsmreview.exports": ROOT / "exports",
    "itsmreview.realism": ROOT / "realism",
}
ASSIST = ROOT / "review" / "assist"


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _imports_of(package: str) -> dict[Path, set[str]]:
    return {p: _imports(p) for p in FOLDERS[package].rglob("*.py")}


def test_no_domain_package_imports_the_model_assistance():
    for package in FOLDERS:
        for path, names in _imports_of(package).items():
            if ASSIST in path.parents:
                continue
            assert not any(n.startswith("itsmreview.review.assist") for n in names), path


def test_domain_packages_never_import_streamlit_or_typer():
    for package in FOLDERS:
        for path, names in _imports_of(package).items():
            ui = {n for n in names if n.split(".")[0] in ("streamlit", "typer")}
            assert not ui, f"{path.relative_to(ROOT)} imports {sorted(ui)}"


def test_the_model_assistance_selects_only_in_its_queries():
    for path in ASSIST.rglob("*.py"):
        if path.name == "queries.py":
            continue
        calls = [
            node
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "select"
        ]
        assert not calls, f"{path.name} calls select()"


def test_the_catalog_reaches_into_review_no_further_than_it_did():
    """catalog sits below review; the few reads of review's tables it makes (ratings for the
    task list, the rating history of a task) stay the only ones, so no new cycle appears."""
    allowed = {"itsmreview.review.models"}
    for path, names in _imports_of("itsmreview.catalog").items():
        reached = {n for n in names if n.startswith("itsmreview.review")}
        assert reached <= allowed, f"{path.name} imports {sorted(reached - allowed)}"


SHELL = [ROOT / "app" / "views", ROOT / "app" / "ui", ROOT / "app" / "cli"]


def test_pages_and_the_cli_import_no_queries_module():
    """The shell calls services: no page, widget or command imports a queries module."""
    found = set()
    for folder in SHELL:
        for path in folder.rglob("*.py"):
            names = _imports(path)
            if any(n == "itsmreview.queries" or n.endswith(".queries") for n in names):
                found.add(path.relative_to(ROOT).as_posix())
    assert not found, f"import a service instead of queries in {sorted(found)}"


def _checkout_copy(dest: Path) -> Path:
    """The source folders and pyproject.toml of this checkout, copied to `dest`."""
    import tomllib

    pyproject = ROOT / "pyproject.toml"
    for folder in tomllib.loads(pyproject.read_text())["tool"]["setuptools"][
        "package-dir"
    ].values():
        shutil.copytree(
            ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
        )
    shutil.copy(pyproject, dest / "pyproject.toml")
    return dest


def _lint_imports(root: Path) -> subprocess.CompletedProcess:
    script = ROOT / ".ci" / "lint-imports"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    return subprocess.run(
        [sys.executable, str(script), "--root", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


def test_import_contracts_catch_planted_violations(tmp_path):
    """The contracts hold on a copy of the tree, and break, naming the module and line, when
    a page imports a queries module, a domain package imports Streamlit, a lower package
    imports a higher one, or a lower sub-area of review a higher one."""
    copy = _checkout_copy(tmp_path / "tree")
    clean = _lint_imports(copy)
    assert clean.returncode == 0, clean.stdout + clean.stderr

    (copy / "app" / "views" / "planted.py").write_text(
        '"""Planted."""\n\nfrom itsmreview.catalog.queries import tasks_frame  # noqa\n'
    )
    (copy / "coverage" / "planted.py").write_text(
        '"""Planted."""\n\nimport streamlit\nfrom itsmreview.review.gate import agreement\n'
    )
    (copy / "review" / "gate" / "planted.py").write_text(
        '"""Planted."""\n\nfrom itsmreview.review.ratings import service  # noqa\n'
    )
    broken = _lint_imports(copy)

    assert broken.returncode != 0
    out = broken.stdout
    assert "Pages and the CLI call services, never a queries module BROKEN" in out
    assert "itsmreview.views.planted -> itsmreview.catalog.queries (l.3)" in out
    assert "Streamlit and Typer only in the shell BROKEN" in out
    assert "itsmreview.coverage.planted -> streamlit (l.3)" in out
    assert "itsmreview.coverage is not allowed to import itsmreview.review" in out
    assert "itsmreview.coverage.planted -> itsmreview.review.gate.agreement (l.4)" in out
    assert "Inside review: each sub-area imports only the ones below it BROKEN" in out
    assert "itsmreview.review.gate.planted -> itsmreview.review.ratings.service (l.3)" in out


def _layered_modules() -> set[str]:
    import tomllib

    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (layers,) = [c["layers"] for c in config["contracts"] if c["name"].startswith("Layers:")]
    return {name.strip() for layer in layers for name in layer.replace(":", "|").split("|")}


def _children(folder: Path, package: str) -> set[str]:
    found = {f"{package}.{p.stem}" for p in folder.glob("*.py") if p.stem != "__init__"}
    found |= {f"{package}.{d.name}" for d in folder.iterdir() if (d / "__init__.py").is_file()}
    return found


def test_the_layers_contract_names_every_package_and_module():
    """The top-level contract lists absolute modules (the ledger is split across two layers), so
    import-linter cannot check it is exhaustive: a module no layer names would be unchecked."""
    import tomllib

    mapped = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"
    ]
    top = _children(ROOT / "app", "itsmreview") | set(mapped) - {"itsmreview"}
    top -= {"itsmreview.ledger"}  # split: its children are layered one by one
    wanted = top | _children(ROOT / "ledger", "itsmreview.ledger")
    missing = wanted - _layered_modules()
    assert not missing, f"add {sorted(missing)} to a layer of [tool.importlinter]"
