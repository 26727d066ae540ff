"""Every data grid of the pages names its placeholder for a missing value: Streamlit draws a
missing cell as a grey "None" otherwise (a Styler's `na_rep` does not reach the grid), which
issue 35 forbids. Read from the source of the pages and widgets."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GRIDS = {"dataframe", "data_editor"}


def grids_without_placeholder(source: str) -> list[int]:
    """The lines of `*.dataframe(...)` and `*.data_editor(...)` calls without `placeholder=`.

    >>> grids_without_placeholder("st.dataframe(f)\\nbox.dataframe(f, placeholder='-')")
    [1]
    """
    return [
        node.lineno
        for node in ast.walk(ast.parse(source))
        if isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in GRIDS
        and not any(keyword.arg == "placeholder" for keyword in node.keywords)
    ]


def test_every_grid_of_the_pages_names_its_placeholder():
    found = [
        f"{path.relative_to(ROOT)}:{line}"
        for path in sorted((ROOT / "app").rglob("*.py"))
        for line in grids_without_placeholder(path.read_text(encoding="utf-8"))
    ]
    assert not found, "data grids that draw a missing value as 'None': " + ", ".join(found)


def test_the_rule_finds_a_grid_without_one():
    assert grids_without_placeholder("import streamlit as st\nst.data_editor(frame)\n") == [2]
