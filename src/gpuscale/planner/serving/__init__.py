"""Serving under load: steady-state model of a continuously batching engine, disaggregated
prefill/decode, and the search for the deployment that meets an SLO."""
