"""Text from outside (tasks, transcripts, logs, names) shown exactly as written.

Bodies go through `show`, which is `st.text`: nothing in it is interpreted. Where Streamlit only
takes Markdown (headings, labels, captions, toasts, messages), `literal` gives the Markdown
source that renders as the text itself.
"""

import re
import string

import streamlit as st

WORD_JOINER = "\u2060"  # invisible; splits an address so that no link is made of it
_PUNCTUATION = frozenset(string.punctuation)
_AUTOLINK_BREAKS = re.compile(r"(?=@)|(?=://)|(?i:(?<=www)(?=\.))")


def literal(text: object) -> str:
    """Markdown that Streamlit renders as `text`: every ASCII punctuation character escaped (no
    emphasis, links, HTML, `:red[...]` colours, `:smile:` emoji, `:material/...:` icons or `$`
    maths), and addresses (`http://`, `www.`, `a@b`) split so that none becomes a link.

    >>> literal("**Reset** :smile: $x$")
    '\\\\*\\\\*Reset\\\\*\\\\* \\\\:smile\\\\: \\\\$x\\\\$'
    >>> literal("ops@example.org").replace(WORD_JOINER, "|")
    'ops|\\\\@example\\\\.org'
    """
    split = _AUTOLINK_BREAKS.sub(WORD_JOINER, str(text))
    return "".join("\\" + c if c in _PUNCTUATION else c for c in split)


def show(text: object) -> None:
    """`text` as written, line breaks and spacing kept."""
    st.text(str(text))


def label(name: str, text: object) -> None:
    """A bold field name over its verbatim text."""
    st.markdown(f"**{literal(name)}**")
    show(text)
