"""Tables as people read them: named columns, words for codes, "-" where a value is missing,
fixed decimals and times to the minute (`itsmreview.ui.words`, which the CLI shares)."""

from functools import partial

import pandas as pd
import streamlit as st
from itsmreview.ui.text import literal
from itsmreview.ui.words import FRACTIONS, MISSING, cell, is_missing, whole, words
from pandas.io.formats.style import Styler

__all__ = ["MISSING", "markdown_table", "readable", "show_table", "text_table"]


def _formats(frame: pd.DataFrame) -> dict[str, partial]:
    """Per column, the function that writes its cells: counts that became floats (a missing
    value among them) without decimals, fractions with their fixed decimals."""
    formats = {}
    for column in frame.columns:
        code = str(column)
        values = frame[column]
        counts = values.dtype.kind == "f" and code not in FRACTIONS and whole(values)
        formats[column] = partial(cell, column=code, decimals=0 if counts else None)
    return formats


def readable(frame: pd.DataFrame, names: dict[str, str] | None = None) -> Styler:
    """`frame` with its columns named by `names` (the others by their words), shown through
    `words.cell`: "-" for missing values, words for codes, fixed decimals, times to the minute;
    the values themselves stay numbers and times (sorting works)."""
    names = names or {}
    shown = frame.reset_index(drop=True)
    formats = _formats(shown)
    headings = {c: names.get(c) or words(c) for c in shown.columns}
    return shown.rename(columns=headings).style.format(
        {headings[c]: f for c, f in formats.items()}, na_rep=MISSING
    )


def show_table(frame: pd.DataFrame, names: dict[str, str] | None = None, **options) -> None:
    st.dataframe(readable(frame, names), hide_index=True, **options, placeholder=MISSING)


def _cell(value: object, formats: dict, column: str) -> str:
    if is_missing(value):
        return MISSING
    text = formats[column](value) if column in formats else cell(value, column)
    return literal(" ".join(text.split()))  # one line per row; every character as written


def markdown_table(
    frame: pd.DataFrame, names: dict[str, str] | None = None, formats: dict | None = None
) -> str:
    """`frame` as a Markdown table whose cells render as their text (nothing interpreted,
    pipes included); `formats` maps a column to a function giving its text, the other cells
    are written by `words.cell`.

    >>> print(markdown_table(pd.DataFrame({"step": [1], "activity": ["a|b *c*"]})))
    | Step | Activity |
    | --- | --- |
    | 1 | a\\|b \\*c\\* |
    """
    names, formats = names or {}, formats or {}
    header = [literal(names.get(c) or words(c)) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for row in frame.itertuples(index=False):
        cells = [_cell(v, formats, c) for c, v in zip(frame.columns, row, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_table(frame: pd.DataFrame, names: dict[str, str] | None = None, **formats) -> None:
    """A short table as plain Markdown: drawn at once, where a data grid would load its
    library first (0.7 s in the browser on a page that has no other grid)."""
    st.markdown(markdown_table(frame, names, formats))
