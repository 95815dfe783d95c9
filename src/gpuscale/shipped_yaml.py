"""Parse the YAML files gpuscale ships (the catalog, the built-in profiles, the cluster data).

Every command reads several of them, and PyYAML's pure-Python parser takes about ten times as
long as its libyaml binding (``yaml.CSafeLoader``, built into the PyYAML wheels): most of a short
command's run. Both build the same objects from these files (tests/unit/test_shipped_yaml.py
checks every shipped file). Files a user names keep ``yaml.safe_load``: on malformed text the
two parsers report different errors, and the messages users see come from the pure-Python one.
"""

from __future__ import annotations

from typing import Any

import yaml

LOADER: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
"""libyaml's safe loader where PyYAML was built with it, else the pure-Python one."""


def load(text: str) -> Any:
    """The document ``text`` holds, as ``yaml.safe_load`` builds it."""
    return yaml.load(text, Loader=LOADER)
