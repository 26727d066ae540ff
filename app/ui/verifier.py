"""The verifier as an expert reads it: the expected record changes as a diff (before -> after,
per record, fields that must not change marked), what must stay unchanged, the expected
actions, other acceptable end states, and the machine checks of the task version."""

import json

import pandas as pd
import streamlit as st
from itsmreview.catalog.state import diff_rows, preserve_rows, state_summary
from itsmreview.ui.tables import text_table
from itsmreview.ui.text import literal, show

CHANGE_MARK = {"added": "+ added", "changed": "~ changed", "removed": "- removed"}
CHECK_MARK = {"pass": "✅ pass", "warn": "⚠️ warn", "fail": "❌ fail", "error": "⛔ error"}


def _value(value) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


NOT_STATED = "(not stated)"


def changes_frame(state: dict) -> pd.DataFrame:
    """The diff's rows as the page shows them: record, change, field, before, after (and a
    lock where a field must not change). A changed record's field whose value before the task
    is not given says so: the task formats that state only the end (EnterpriseOps-Gym's
    `COUNT(*)` checks, tau2's assertions, without their seed database) leave `before` empty.
    Values keep their type (a frame built from the rows made 3 of `before` 3.0 and an unknown
    one NaN)."""
    rows = diff_rows(state)
    frame = pd.DataFrame(rows, dtype=object)
    if frame.empty:
        return frame
    frame["record"] = [
        f"{e} {k}".strip() if k else f"{e} (new record)" if c == "added" else e
        for e, k, c in zip(frame["entity"], frame["key"], frame["change"], strict=True)
    ]
    frame["before"] = [
        NOT_STATED if c == "changed" and b is None and f else _value(b)
        for c, b, f in zip(frame["change"], frame["before"], frame["field"], strict=True)
    ]
    frame["change"] = frame["change"].map(CHANGE_MARK)
    frame["after"] = frame["after"].map(_value)
    columns = ["record", "change", "field", "before", "after"]
    if frame["must_not_change"].any():  # a change set that touches what it must preserve
        frame["keep"] = frame["must_not_change"].map({True: "🔒", False: ""})
        columns.append("keep")
    return frame[columns]


def _changes_table(state: dict) -> None:
    frame = changes_frame(state)
    if frame.empty:
        return
    text_table(
        frame,
        {
            "record": "Record",
            "change": "Change",
            "field": "Field",
            "before": "Before",
            "after": "After",
            "keep": "Must not change",
        },
    )
    if (frame["before"] == NOT_STATED).any():
        st.caption(
            f"{NOT_STATED}: the task gives the value this field must end with, not the value "
            "it has before (its verifier checks the end state only)."
        )


def state_panel(state: dict | None, alternatives: list[dict] | None) -> None:
    """The expected end state of a task version and its other acceptable end states."""
    if not state and not alternatives:
        return
    st.markdown("**Expected end state**")
    if state:
        st.caption(literal(state_summary(state)))
        _changes_table(state)
        kept = preserve_rows(state)
        if kept:
            st.markdown("🔒 **Must stay unchanged**")
            text_table(
                pd.DataFrame(kept),
                {"entity": "Entity", "key": "Record", "fields": "Fields", "note": "Why"},
            )
        actions = state.get("actions") or []
        if actions:
            st.markdown("**Expected actions**")
            text_table(
                pd.DataFrame(
                    [
                        {
                            "by": a.get("by", "agent"),
                            "name": a["name"],
                            "arguments": _value(a.get("arguments") or {}),
                        }
                        for a in actions
                    ]
                ),
                {"by": "By", "name": "Action", "arguments": "Arguments"},
            )
        if state.get("checks"):
            st.markdown("**Other checks of the verifier**")
            show("\n".join(state["checks"]))
    if alternatives:
        st.markdown(f"**Other acceptable end states** ({len(alternatives)})")
        for alternative in alternatives:
            st.markdown(f"- {literal(alternative['description'])}")
            if alternative.get("changes"):
                _changes_table({"changes": alternative["changes"]})


def checks_panel(checks: pd.DataFrame) -> None:
    """The newest result of each machine check of the task version."""
    if checks.empty:
        return
    failing = int(checks["status"].isin(["fail", "error"]).sum())
    title = f"Machine checks ({len(checks)}" + (f", {failing} failing)" if failing else ")")
    with st.expander(title, expanded=bool(failing)):
        shown = checks.assign(status=checks["status"].map(CHECK_MARK))
        text_table(
            shown[["check", "status", "summary", "tool"]],
            {"check": "Check", "status": "Result", "summary": "Summary", "tool": "Tool"},
        )
