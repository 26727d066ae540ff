"""Text from outside (tasks, transcripts, logs, names) shown exactly as written.

Bodies go through `show`, which is `st.text`: nothing in it is interpreted. Where Streamlit only
takes Markdown (headings, labels, captions, toasts, messages), `literal` gives the Markdown
source that renders as the text itself.
"""

import streamlit as st
from itsmreview.ui.markup import WORD_JOINER, literal

__all__ = ["WORD_JOINER", "label", "literal", "show"]


def show(text: object) -> None:
    """`text` as written, line breaks and spacing kept."""
    st.text(str(text))


def label(name: str, text: object) -> None:
    """A bold field name over its verbatim text."""
    st.markdown(f"**{literal(name)}**")
    show(text)
