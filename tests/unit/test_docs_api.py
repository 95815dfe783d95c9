"""``docs/api.md`` is executed: its python blocks run in order in one namespace, as a notebook."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "api.md"
BLOCK = re.compile(r"^```python\n(.*?)^```", re.DOTALL | re.MULTILINE)


def blocks() -> list[str]:
    return BLOCK.findall(DOC.read_text())


def test_the_page_has_examples() -> None:
    assert len(blocks()) >= 5


def test_the_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    namespace: dict[str, object] = {"__name__": "docs_api"}
    for i, code in enumerate(blocks()):
        exec(compile(code, f"{DOC.name}[block {i}]", "exec"), namespace)
    assert (tmp_path / "scaling.html").stat().st_size > 1000
