"""Links from one page to another that open it on what the link names: the Tasks page
filtered by persona or source variant. The filter travels in the address (`?persona=...`,
`?variant=KEY`), so the link can be kept, opened in a new tab or sent to a colleague."""

import streamlit as st
from itsmreview.ui.text import literal

TASKS_PAGE = "views/tasks.py"
PERSONA = "persona"
VARIANT = "variant"


def tasks_link(
    label: str, *, persona: str | None = None, variant_key: str | None = None, help=None
) -> None:
    """A link to the Tasks page showing the tasks of `persona` or of the source variant whose
    sequence key is `variant_key`. `label` is shown as written."""
    params = {PERSONA: persona} if persona is not None else {VARIANT: variant_key}
    st.page_link(
        TASKS_PAGE,
        label=literal(label),
        icon=":material/assignment:",
        help=help,
        query_params=params,
    )


def linked_filters() -> dict | None:
    """The Tasks page's filters a link named (`personas`, `variant_key`), read once: the address
    forgets them, so a filter chosen on the page afterwards is not undone. None without one."""
    if PERSONA not in st.query_params and VARIANT not in st.query_params:
        return None
    chosen = {
        "personas": st.query_params.get_all(PERSONA),
        "variant_key": st.query_params.get(VARIANT),
    }
    for name in (PERSONA, VARIANT):
        st.query_params.pop(name, None)
    return chosen
