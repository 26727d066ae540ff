"""Doctests of the public modules, imported by their real names (never as bare `coverage`)."""

import doctest
import importlib

import pytest

MODULES = [
    "itsmreview.coverage.variants",
    "itsmreview.coverage.samples",
    "itsmreview.coverage.engine",
    "itsmreview.coverage.xes_stream",
    "itsmreview.coverage.metrics",
    "itsmreview.coverage.synthetic",
    "itsmreview.coverage.synthetic_bpi2014",
    "itsmreview.coverage.linked",
    "itsmreview.coverage.outcomes",
    "itsmreview.coverage.teams",
    "itsmreview.coverage.across_logs",
    "itsmreview.demo.loader",
    "itsmreview.ledger.chain",
    "itsmreview.ledger.evidence.marks",
    "itsmreview.review.gate.agreement",
    "itsmreview.review.gate.concordance",
    "itsmreview.settings",
    "itsmreview.files",
    "itsmreview.catalog.queries",
    "itsmreview.ui.transcript",
    "itsmreview.ui.markup",
    "itsmreview.ui.tables",
    "itsmreview.ui.charts",
    "itsmreview.ui.words",
    "itsmreview.coverage.eventlog",
    "itsmreview.coverage.friction",
    "itsmreview.review.assist.client",
    "itsmreview.review.assist.prompts",
    "itsmreview.processes",
    "itsmreview.realism.metrics",
    "itsmreview.realism.vocabulary",
    "itsmreview.realism.mapping",
    "itsmreview.realism.blind",
    "itsmreview.realism.service",
    "itsmreview.review.ratings.builtin_checks",
    "itsmreview.review.ratings.findings",
    "itsmreview.exports.audit",
    "itsmreview.exports.harbor",
    "itsmreview.exports.hf",
]


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no doctest"
    assert result.failed == 0
