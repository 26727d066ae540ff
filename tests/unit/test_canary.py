import importlib


def test_coverage_is_coverage_py_and_ours_is_namespaced():
    coverage = importlib.import_module("coverage")
    assert hasattr(coverage, "Coverage"), "a local 'coverage' package shadows coverage.py"
    ours = importlib.import_module("itsmreview.coverage")
    assert ours.__name__ == "itsmreview.coverage"
    assert not hasattr(ours, "Coverage")
