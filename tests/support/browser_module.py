"""tests/e2e/test_browser.py as a module, for the other browser tests to share its fixtures
and helpers (the suite imports test files by path, so they cannot import each other)."""

import importlib.util
from functools import cache
from pathlib import Path

BROWSER_TESTS = Path(__file__).resolve().parents[1] / "e2e" / "test_browser.py"


@cache
def browser_tests():
    spec = importlib.util.spec_from_file_location("browser_tests", BROWSER_TESTS)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
