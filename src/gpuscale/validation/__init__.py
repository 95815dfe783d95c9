"""Hold the cost model against published, measured runs (``../shared/validation``)."""
