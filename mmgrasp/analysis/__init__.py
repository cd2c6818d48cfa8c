"""Measuring tools' library parts, above every other layer (they build whole configs)."""
