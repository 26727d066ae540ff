"""Event-log import, variants, roles, coverage metrics and gaps."""

if __name__ == "coverage":
    # Imported as bare `coverage`: Python runs in the repository root (`python -m pytest`,
    # `python -m coverage`), whose folder coverage/ comes before site-packages on sys.path.
    # That name belongs to coverage.py, so hand it over: load coverage.py from the rest of the
    # path and leave it in sys.modules, which is what the import returns. As the package of
    # this folder, `itsmreview.coverage`, none of this runs.
    import importlib.machinery
    import importlib.util
    import os
    import sys

    _here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    _path = [p for p in sys.path if os.path.abspath(p or os.curdir) != _here]
    _spec = importlib.machinery.PathFinder.find_spec("coverage", _path)
    if _spec is None or _spec.loader is None:
        raise ImportError(
            f"'coverage' here is the folder {os.path.join(_here, 'coverage')} "
            "(itsmreview.coverage), and coverage.py is not installed: "
            "pip install -e '.[test]'",
            name="coverage",
        )
    _module = importlib.util.module_from_spec(_spec)
    sys.modules["coverage"] = _module
    _spec.loader.exec_module(_module)
