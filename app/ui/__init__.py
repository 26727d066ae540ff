"""Shared Streamlit widgets; the only place besides views/ that imports streamlit."""
