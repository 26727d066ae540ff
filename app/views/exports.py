"""Page: export an approved task set with its evidence, and the exports written so far."""

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope, utcnow
from itsmreview.exports.service import (
    FORMATS,
    NAME_LIMIT,
    export_choices,
    export_named,
    list_exports,
    preview,
)
from itsmreview.review.gate.work import apply_pending
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.cache import cached
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal
from itsmreview.worker import export_zip, in_workers, job_of, queue_export

ALL = "(all)"
user = require(Role.lead)
st.title("Exports")
st.write(
    "An export holds the approved version of each chosen task with the evidence that approved "
    "it: ratings (pseudonymised), agreement, the gate's decisions, adjudications, coverage, "
    "rubrics, the ledger slice and a manifest of sha256 digests (`itsmreview export verify`)."
)
with session_scope() as session:
    choices = export_choices(session=session, actor=user)
left, middle, right = st.columns(3)
round_name = left.selectbox("Round", [ALL, *choices["rounds"]])
log = middle.selectbox("Source log", [ALL, *choices["logs"]])
persona = right.selectbox("Persona", [ALL, *choices["personas"]])
filters = {
    "round_name": None if round_name == ALL else round_name,
    "log": None if log == ALL else log,
    "persona": None if persona == ALL else persona,
}
shown = cached(preview)(user, **filters)
tiles = st.columns(3)
tiles[0].metric("Approved tasks", shown["tasks"])
tiles[1].metric("Personas", len(shown["by_persona"]))
tiles[2].metric("Source logs", len([k for k in shown["by_log"] if k != "-"]))
if shown["tasks"]:
    st.caption(
        "By persona: "
        + ", ".join(f"{k} {v}" for k, v in shown["by_persona"].items())
        + " · by log: "
        + ", ".join(f"{k} {v}" for k, v in shown["by_log"].items())
    )
weak = {name: gate for name, gate in shown["gate"].items() if not gate["reached"]}
for name, gate in shown["gate"].items():
    if gate["reached"]:
        on = " on the panel's final answers" if gate.get("basis") == "Delphi final answers" else ""
        st.success(
            f"Round {literal(name)}: agreement{on} reaches the gate (alpha >= {gate['alpha_min']})."
        )
    else:
        st.warning(literal(f"Round {name}: {'; '.join(gate['problems'])}."))
with st.form("export"):
    formats = st.multiselect("Formats", FORMATS, default=["native", "hf"])
    # proposed once: a default that changed each second gave the field a new identity, and
    # a name typed in one second was dropped by a run in the next
    proposed = st.session_state.setdefault("export-proposed", f"export-{utcnow():%Y%m%d-%H%M%S}")
    name = st.text_input(
        "Export name (letters, digits, ., _ and -)",
        value=proposed,
        key="export-name",
        max_chars=NAME_LIMIT,
    )
    with_names = st.checkbox("Raters by name (default: rater-01, rater-02, ...)")
    reason = ""
    if weak:
        reason = st.text_input(
            "Reason for exporting although agreement does not reach the gate (recorded)"
        )
    submitted = st.form_submit_button(
        "Export", type="primary", disabled=not shown["tasks"] or not formats
    )


def _show_export(result) -> None:
    st.success(
        f"Exported {result['tasks']} task(s) to {result['path']}; manifest sha256 "
        f"`{result['manifest_sha256']}`"
    )
    found = export_zip(result)
    if found is not None:
        name, data = found
        st.download_button("Download the zip", data=data, file_name=name, mime="application/zip")
    elif result.get("zip_path"):
        st.caption(f"The zip is at {result['zip_path']} on the worker's host, not readable here.")


@st.fragment(run_every=1.0)
def _export_job(job_id: int) -> None:
    """An export a worker runs: its progress from the database until it ends."""
    job = job_of(job_id)
    if job.status in ("queued", "running"):
        waiting = "waiting for a worker" if job.status == "queued" else (job.message or "running")
        st.progress(job.progress, text=f"export {job.key}: {waiting}")
        return
    st.session_state.pop("export-job", None)
    if job.status == "done":
        _show_export(job.result or {})
    else:
        st.error(f"The export {job.key} failed: {job.error}")


options = dict(
    formats=formats,
    with_names=with_names,
    allow_tentative=bool(weak),
    reason=reason,
    make_zip=True,
    **filters,
)
if submitted and in_workers():
    job = perform(queue_export, name=name, actor=user, **options)
    if job is not FAILED:
        st.session_state["export-job"] = job.id
if st.session_state.get("export-job"):
    _export_job(st.session_state["export-job"])
elif submitted:
    bar = st.progress(0.0, text="applying ratings still on their way to the gate")
    apply_pending()  # they decide what is approved, too
    result = perform(
        export_named,
        name=name,
        actor=user,
        progress=lambda stage, fraction: bar.progress(fraction, text=stage),
        **options,
    )
    if result is not FAILED:
        _show_export(result.as_dict() | {"zip_path": result.zip_path})
st.subheader("Exports so far")
with session_scope() as session:
    history = list_exports(session=session, actor=user)
if history.empty:
    st.caption("None yet.")
else:
    show_table(history, {"content_hash": "Manifest sha256", "created_at": "Exported"})
