import streamlit as st
from itsmreview.accounts.models import Role
from itsmreview.db import session_scope
from itsmreview.exports.service import list_exports
from itsmreview.ui.auth import require

user = require(Role.lead)
st.title("Exports")
with session_scope() as session:
    exports = list_exports(session=session, actor=user)
if exports.empty:
    st.info(
        "No task set exported yet. Exporting approved task sets with their ratings, agreement "
        "and provenance is not built yet; until it is, `itsmreview tasks export DEST --id ID` "
        "writes chosen tasks back in their own formats."
    )
else:
    st.dataframe(exports, hide_index=True)
