"""Materialised figures: results that need a whole round or catalog, kept per state of data."""
