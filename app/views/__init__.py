"""The Streamlit pages, one per file; streamlit_app.py builds the navigation over them."""
