"""gpuscale: one GPU, one node, or a cluster? A validated cost model for large-model training."""

__version__ = "0.1.0"

#: Version of every machine-readable document gpuscale writes (``--json`` output, profiles).
SCHEMA_VERSION = 1
