"""Shared Streamlit widgets; the only place besides pages/ that imports streamlit."""
