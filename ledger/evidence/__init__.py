"""Provenance as evidence: ledger audit, recorded sources, summaries."""
