"""Where SQL is built: SQLAlchemy's and SQLModel's statement constructors (`select`, `text`,
`insert`, `update`, `delete`) appear only in queries modules (a `queries.py`, or the modules of
a `queries/` package), and in the few files listed below with the reason each needs them.
Read from the source, every folder of the package."""

import ast
import functools
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSTRUCTORS = {"select", "text", "insert", "update", "delete"}
LIBRARIES = ("sqlalchemy", "sqlmodel")
# Files outside a queries module that build statements, relative to the checkout, each with
# why it must. A pattern ending in /* covers that folder's files.
EXCEPTIONS = {
    "app/db.py": "the helpers the queries modules build on (distinct_walk, in_ids, bulk_insert, "
    "ANALYZE)",
    "app/migrations/versions/*": "a revision's data steps are written as SQL of its own time, "
    "not through today's queries",
}


def _package_folders(root: Path) -> list[Path]:
    mapping = tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]
    return sorted({root / folder for folder in mapping["package-dir"].values()})


def _is_library(module: str | None) -> bool:
    return bool(module) and module.split(".")[0] in LIBRARIES


def constructor_uses(source: str) -> list[tuple[int, str]]:
    """(line, name) of every SQL statement constructor taken from SQLAlchemy or SQLModel:
    imported by name (`from sqlmodel import select`) or reached through the module
    (`import sqlalchemy as sa; sa.text(...)`)."""
    found: list[tuple[int, str]] = []
    modules: set[str] = set()  # local names bound to sqlalchemy/sqlmodel (sub)modules
    tree = ast.parse(source)
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and _is_library(node.module):
            for alias in node.names:
                if alias.name in CONSTRUCTORS:
                    found.append((node.lineno, f"{node.module}.{alias.name}"))
                else:
                    modules.add(alias.asname or alias.name)  # e.g. `from sqlalchemy import sql`
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_library(alias.name):
                    modules.add(alias.asname or alias.name.split(".")[0])
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in CONSTRUCTORS:
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in modules:
                found.append((node.lineno, f"{ast.unparse(node)}"))
    return sorted(found)


def _excepted(relative: str) -> str | None:
    for pattern in EXCEPTIONS:
        if relative == pattern or (
            pattern.endswith("/*") and relative.rpartition("/")[0] == pattern[:-2]
        ):
            return pattern
    return None


def violations(root: Path) -> tuple[list[str], set[str]]:
    """Every use of a constructor outside a queries module and the listed exceptions, as
    'path:line: name ...', and the exceptions that were used."""
    problems: list[str] = []
    used: set[str] = set()
    for folder in _package_folders(root):
        for path in sorted(folder.rglob("*.py")):
            relative = path.relative_to(root).as_posix()
            uses = constructor_uses(path.read_text(encoding="utf-8"))
            if not uses or path.name == "queries.py" or path.parent.name == "queries":
                continue
            pattern = _excepted(relative)
            if pattern:
                used.add(pattern)
                continue
            problems += [
                f"{relative}:{line}: {name} outside a queries module; move the statement into "
                f"the package's queries.py and call it from there"
                for line, name in uses
            ]
    return problems, used


@functools.cache
def _checkout() -> tuple[list[str], set[str]]:
    return violations(ROOT)


def test_sql_is_built_only_in_queries_modules():
    problems, _ = _checkout()
    assert not problems, "\n".join(problems)


def test_every_exception_is_still_needed():
    _, used = _checkout()
    assert used == set(EXCEPTIONS), f"no longer needed, remove: {sorted(set(EXCEPTIONS) - used)}"


def test_a_planted_statement_is_named_with_its_file_and_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[tool.setuptools.package-dir]\n"pkg" = "app"\n"pkg.sub" = "sub"\n'
    )
    (tmp_path / "app" / "views").mkdir(parents=True)
    (tmp_path / "sub").mkdir()
    (tmp_path / "app" / "queries.py").write_text("from sqlmodel import select\n")
    (tmp_path / "app" / "views" / "page.py").write_text(
        "import streamlit as st\n\nfrom sqlmodel import Session, select\n"
    )
    (tmp_path / "sub" / "service.py").write_text(
        "import sqlalchemy as sa\n\n\ndef f(s):\n    return s.execute(sa.sql.text('SELECT 1'))\n"
    )
    (tmp_path / "sub" / "queries.py").write_text("import sqlalchemy as sa\nsa.delete\n")

    problems, _ = violations(tmp_path)

    assert [p.split(" outside")[0] for p in problems] == [
        "app/views/page.py:3: sqlmodel.select",
        "sub/service.py:5: sa.sql.text",
    ]
    assert "move the statement into the package's queries.py" in problems[0]


def test_other_names_of_the_libraries_are_not_statements():
    source = (
        "from sqlalchemy import event, func\nfrom sqlmodel import Session\n"
        "session.delete(row)\nvalues.update(x)\nquery.select()\n"
    )
    assert constructor_uses(source) == []
