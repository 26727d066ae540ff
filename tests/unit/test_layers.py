"""The package layering docs/architecture.md describes, read from the source's imports."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = {  # import name -> folder
    "itsmreview.catalog": ROOT / "app" / "catalog",
    "itsmreview.review": ROOT / "review",
    "itsmreview.coverage": ROOT / "coverage",
    "itsmreview.ledger": ROOT / "ledger",
    "itsmreview.exports": ROOT / "exports",
    "itsmreview.provenance": ROOT / "app" / "provenance",
    "itsmreview.assist": ROOT / "app" / "assist",
}


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def _imports_of(package: str) -> dict[Path, set[str]]:
    return {p: _imports(p) for p in FOLDERS[package].glob("*.py")}


def test_no_domain_package_imports_the_model_assistance():
    for package in FOLDERS:
        if package == "itsmreview.assist":
            continue
        for path, names in _imports_of(package).items():
            assert not any(n.startswith("itsmreview.assist") for n in names), path


def test_domain_packages_never_import_streamlit_or_typer():
    for package in FOLDERS:
        for path, names in _imports_of(package).items():
            ui = {n for n in names if n.split(".")[0] in ("streamlit", "typer")}
            assert not ui, f"{path.relative_to(ROOT)} imports {sorted(ui)}"


def test_the_model_assistance_selects_only_in_its_queries():
    for path in FOLDERS["itsmreview.assist"].glob("*.py"):
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
    allowed = {"itsmreview.review.models", "itsmreview.review.queries"}
    for path, names in _imports_of("itsmreview.catalog").items():
        reached = {n for n in names if n.startswith("itsmreview.review")}
        assert reached <= allowed, f"{path.name} imports {sorted(reached - allowed)}"
