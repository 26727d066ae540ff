"""Tables as people read them: named columns, "-" where a value is missing."""

import pandas as pd
import streamlit as st
from pandas.io.formats.style import Styler

MISSING = "-"


def readable(frame: pd.DataFrame, names: dict[str, str], *, precision: int = 3) -> Styler:
    """`frame` with its columns renamed by `names` (others kept), shown with missing values as
    "-" and floats to `precision` places; the values themselves stay numbers (sorting works)."""
    return frame.rename(columns=names).style.format(na_rep=MISSING, precision=precision)


def show_table(frame: pd.DataFrame, names: dict[str, str], **options) -> None:
    st.dataframe(readable(frame, names), hide_index=True, **options)
