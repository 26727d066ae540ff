import tempfile
from pathlib import Path

import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.catalog.service import import_bundle_upload, preview_bundle_upload
from itsmreview.coverage.eventlog import PRESETS
from itsmreview.coverage.overview import logs_table
from itsmreview.coverage.service import import_log
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.settings import get_settings
from itsmreview.ui.auth import require

user = require(Role.admin)
st.title("Imports")
log_tab, task_tab = st.tabs(["Event logs", "Tasks"])
with log_tab:
    with session_scope() as session:
        st.dataframe(logs_table(session=session), hide_index=True)
    upload = st.file_uploader("Event log (CSV, CSV.gz, XES, XES.gz, parquet)", key="log-upload")
    preset = st.selectbox("Preset", ["(XES keys)"] + sorted(PRESETS))
    name = st.text_input("Log name", value=Path(upload.name).name.split(".")[0] if upload else "")
    if upload and st.button("Import log", type="primary"):
        folder = get_settings().data_dir / "uploads"
        folder.mkdir(parents=True, exist_ok=True)
        target = Path(tempfile.mkdtemp(dir=folder)) / upload.name
        target.write_bytes(upload.getvalue())
        bar = st.progress(0.0, text="starting")
        try:
            with session_scope() as session:
                result = import_log(
                    target,
                    session=session,
                    name=name or None,
                    preset=None if preset.startswith("(") else preset,
                    actor_id=user.id,
                    progress=lambda stage, f: bar.progress(f, text=stage),
                )
        except ItsmReviewError as exc:
            st.error(str(exc))
        else:
            log = result.log
            st.success(
                f"{log.name} v{log.version}: {log.n_cases:,} cases, {log.n_events:,} "
                f"events" + ("" if result.created else " (already imported)")
            )
with task_tab:
    bundle = st.file_uploader("Native task bundle (.json, .jsonl, .yaml)", key="task-upload")
    if bundle:
        try:
            with session_scope() as session:
                preview = preview_bundle_upload(
                    bundle.name, bundle.getvalue(), session=session, actor=user
                )
        except ItsmReviewError as exc:
            st.error(str(exc))
        else:
            st.write(
                f"Would create **{len(preview.created)}**, add new versions to "
                f"**{len(preview.new_versions)}**, leave **{len(preview.unchanged)}** "
                "unchanged."
            )
            if st.button("Confirm import", type="primary"):
                with session_scope() as session:
                    report = import_bundle_upload(
                        bundle.name, bundle.getvalue(), session=session, actor=user
                    )
                st.success(
                    f"Imported {len(report.created)} new task(s), "
                    f"{len(report.new_versions)} new version(s)."
                )
