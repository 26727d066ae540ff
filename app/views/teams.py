"""Page: a log's team mapping, assignment groups mapped to the platform's team types."""

import pandas as pd
import plotly.express as px
import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.coverage.teams import (
    MAX_MAPPING_BYTES,
    group_table,
    mapping_versions,
    parse_mapping,
    role_attributes,
    set_team_mapping,
)
from itsmreview.db import session_scope
from itsmreview.errors import ItsmReviewError
from itsmreview.ui.action import FAILED, perform
from itsmreview.ui.auth import require
from itsmreview.ui.charts import NO_TOOLBAR
from itsmreview.ui.logs import logs_or_stop
from itsmreview.ui.notice import announce
from itsmreview.ui.tables import show_table
from itsmreview.ui.text import literal
from itsmreview.ui.words import MISSING

user = require(Role.lead)
st.title("Team mapping")
st.write(
    "Map a log's assignment groups to the teams practitioners know them by. Coverage then "
    "reads the roles by team as well (the role attribute `team`). Each save is a new version, "
    "kept in the ledger with its source."
)
names = logs_or_stop("No event log imported yet: `itsmreview log import PATH --preset bpi2014`.")
left, right = st.columns(2)
log_name = left.selectbox("Event log", names, key="teams-log")
with session_scope() as session:
    attributes = role_attributes(session=session, log_name=log_name)
if not attributes:
    st.info("This log has no role attribute to map; import it with --role columns.")
    st.stop()
attribute = right.selectbox("Groups are the values of", attributes, key="teams-attribute")
with session_scope() as session:
    table = group_table(session=session, log_name=log_name, attribute=attribute)
    versions = mapping_versions(session=session, actor=user, log_name=log_name)
mapped = table["team"] != ""
tiles = st.columns(4)
tiles[0].metric("Groups", f"{len(table):,}")
tiles[1].metric("Mapped", f"{int(mapped.sum()):,}")
tiles[2].metric(
    "Events mapped",
    f"{table.loc[mapped, 'events'].sum() / max(table['events'].sum(), 1):.1%}",
    help="Share of the attribute's events whose group has a team.",
)
tiles[3].metric("Teams", f"{table.loc[mapped, 'team'].nunique():,}")
if mapped.any():
    per_team = table[mapped].groupby("team", as_index=False)["events"].sum().sort_values("events")
    figure = px.bar(per_team, x="events", y="team", orientation="h")
    figure.update_layout(height=80 + 22 * len(per_team), margin={"t": 10, "b": 10}, yaxis_title="")
    st.plotly_chart(figure, key="team-events", config=NO_TOOLBAR)

with st.form("team-mapping"):
    st.caption("Groups by events, most frequent first: type each group's team (and level).")
    edited = st.data_editor(
        table,
        hide_index=True,
        disabled=["group", "events", "cases"],
        column_config={
            "group": "Group",
            "events": st.column_config.NumberColumn("Events", format="%d"),
            "cases": st.column_config.NumberColumn("Cases", format="%d"),
            "team": st.column_config.TextColumn("Team", max_chars=128),
            "level": st.column_config.TextColumn("Level or role", max_chars=64),
        },
        key=f"teams-editor-{log_name}-{attribute}",
        placeholder=MISSING,
    )
    source = st.radio(
        "Source",
        ["expert", "external"],
        horizontal=True,
        help="expert: your own judgement; external: a document such as an org chart.",
    )
    reference = st.text_input("Reference (what it rests on)", max_chars=500)
    saved = st.form_submit_button("Save as a new version", type="primary")


def save(teams: dict[str, str], levels: dict[str, str], source_kind: str, cited: str) -> None:
    """A new version of the mapping (its own transaction); the page then shows it."""
    result = perform(
        set_team_mapping,
        actor=user,
        log_name=log_name,
        teams=teams,
        levels=levels,
        attribute=attribute,
        source_kind=source_kind,
        reference=cited,
    )
    if result is not FAILED:
        announce(f"Team mapping version {result[0].version} saved.")
        st.rerun()


if saved:
    frame = pd.DataFrame(edited).fillna("")
    teams = {str(r.group): str(r.team) for r in frame.itertuples() if str(r.team).strip()}
    levels = {str(r.group): str(r.level) for r in frame.itertuples() if str(r.level).strip()}
    save(teams, levels, source, reference)

with st.expander("Load a mapping file (CSV group,team[,level] or YAML)"):
    upload = st.file_uploader("Mapping file", type=["csv", "yaml", "yml"], key="teams-file")
    if upload is not None:
        if upload.size > MAX_MAPPING_BYTES:
            st.error(f"The file is larger than {MAX_MAPPING_BYTES // 2**20} MiB; nothing loaded.")
        else:
            try:
                teams, levels = parse_mapping(upload.getvalue().decode("utf-8"), upload.name)
            except (ItsmReviewError, UnicodeDecodeError) as exc:
                st.error(literal(f"{upload.name}: {exc}"))
            else:
                st.caption(f"{len(teams)} groups, {len(set(teams.values()))} teams in the file.")
                if st.button("Save the file's mapping as a new version", key="teams-file-save"):
                    save(teams, levels, "external", upload.name)

st.subheader("Versions")
if versions.empty:
    st.caption("None yet.")
else:
    show_table(
        versions,
        {
            "version": "Version",
            "attribute": "Groups of",
            "groups": "Groups",
            "teams": "Teams",
            "source_kind": "Source",
            "reference": "Reference",
            "created_at": "Saved",
        },
    )
