"""Tables as people read them: named columns, "-" where a value is missing."""

import pandas as pd
import streamlit as st
from itsmreview.ui.text import literal
from pandas.io.formats.style import Styler

MISSING = "-"


def readable(frame: pd.DataFrame, names: dict[str, str], *, precision: int = 3) -> Styler:
    """`frame` with its columns renamed by `names` (others kept), shown with missing values as
    "-" and floats to `precision` places; the values themselves stay numbers (sorting works)."""
    return frame.rename(columns=names).style.format(na_rep=MISSING, precision=precision)


def show_table(frame: pd.DataFrame, names: dict[str, str], **options) -> None:
    st.dataframe(readable(frame, names), hide_index=True, **options)


def _cell(value: object, formats: dict, column: str) -> str:
    if value is None or (not isinstance(value, list | tuple | dict) and pd.isna(value)):
        return MISSING
    text = formats[column](value) if column in formats else str(value)
    return literal(" ".join(text.split()))  # one line per row; every character as written


def markdown_table(
    frame: pd.DataFrame, names: dict[str, str] | None = None, formats: dict | None = None
) -> str:
    """`frame` as a Markdown table whose cells render as their text (nothing interpreted,
    pipes included); `formats` maps a column to a function giving its text.

    >>> print(markdown_table(pd.DataFrame({"step": [1], "activity": ["a|b *c*"]})))
    | step | activity |
    | --- | --- |
    | 1 | a\\|b \\*c\\* |
    """
    names, formats = names or {}, formats or {}
    header = [literal(names.get(c, c)) for c in frame.columns]
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    for row in frame.itertuples(index=False):
        cells = [_cell(v, formats, c) for c, v in zip(frame.columns, row, strict=True)]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def text_table(frame: pd.DataFrame, names: dict[str, str] | None = None, **formats) -> None:
    """A short table as plain Markdown: drawn at once, where a data grid would load its
    library first (0.7 s in the browser on a page that has no other grid)."""
    st.markdown(markdown_table(frame, names, formats))
