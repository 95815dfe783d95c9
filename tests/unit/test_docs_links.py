"""Links in README.md and docs/**.md resolve: every relative link names a file of the checkout and
every ``#anchor`` a heading of its target, as GitHub renders them. Moving a section to another file
(docs/investigations/) or renaming a heading breaks the links that pointed at it; this catches
them. The docstrings and comments that cite docs/benchmarks.md or a file of docs/investigations/
cite one that exists."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$")
INLINE_CODE = re.compile(r"`[^`\n]*`")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
HTML_ANCHOR = re.compile(r"<a\s+(?:name|id)=\"([^\"]+)\"")
# This project's journal files (other projects' docs/*.md are cited too, so only these are checked)
DOC_PATH = re.compile(r"\bdocs/(?:benchmarks|investigations/[\w.-]+)\.md\b")


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link targets and formatting dropped, lower case, every
    character that is not a letter, digit, space, hyphen or underscore removed, spaces to hyphens
    (github/cmark-gfm's anchor filter, as html-pipeline's TableOfContentsFilter applies it)."""
    text = LINK.sub(lambda m: m.group(1), heading)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """(line number, line) outside fenced code blocks."""
    out = []
    fenced = False
    for number, line in enumerate(text.split("\n"), start=1):
        if FENCE.match(line):
            fenced = not fenced
            continue
        if not fenced:
            out.append((number, line))
    return out


def anchors(path: Path) -> set[str]:
    """Every anchor a Markdown file has: its headings' slugs (a repeated slug gets -1, -2, ... as
    GitHub numbers them) and explicit ``<a name=...>`` / ``id=`` anchors."""
    seen: Counter[str] = Counter()
    found = set()
    for _, line in prose_lines(path.read_text(encoding="utf-8")):
        m = HEADING.match(line)
        if m:
            base = slug(m.group(1))
            found.add(base if not seen[base] else f"{base}-{seen[base]}")
            seen[base] += 1
        found.update(HTML_ANCHOR.findall(line))
    return found


def broken_links(files: list[Path], root: Path) -> list[str]:
    """'file:line: target (why)' for every relative link or anchor that does not resolve."""
    cache: dict[Path, set[str]] = {}
    broken = []
    for path in files:
        for number, line in prose_lines(path.read_text(encoding="utf-8")):
            for m in LINK.finditer(INLINE_CODE.sub("", line)):
                target = m.group(2)
                if re.match(r"^[a-z][a-z0-9+.-]*:", target):
                    continue  # http:, https:, mailto:
                file_part, _, anchor = target.partition("#")
                dest = (path.parent / file_part).resolve() if file_part else path
                where = f"{path.relative_to(root)}:{number}: {target}"
                if not dest.exists():
                    broken.append(f"{where} (no such file)")
                    continue
                if anchor and dest.suffix == ".md":
                    if dest not in cache:
                        cache[dest] = anchors(dest)
                    if anchor not in cache[dest]:
                        broken.append(f"{where} (no heading with this anchor)")
    return broken


def doc_files() -> list[Path]:
    return [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def test_slug_is_githubs() -> None:
    assert (
        slug("Training throughput vs published runs (`benchmarks/validate.py`)")
        == "training-throughput-vs-published-runs-benchmarksvalidatepy"
    )
    assert slug("Which hook: `gpuscale advise-comm`") == "which-hook-gpuscale-advise-comm"
    assert slug("vLLM's tail: a 1k/8k C = 64 run") == "vllms-tail-a-1k8k-c--64-run"


def test_checker_finds_a_broken_anchor_and_file(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text(
        "# Other\n\n## A section (`x.py`)\n\n## A section (`x.py`)\n"
    )
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md#a-section-xpy) [ok too](other.md#a-section-xpy-1) [self](#page)\n"
        "[bad anchor](other.md#a-section) [bad file](missing.md) [web](https://example.com/x#y)\n"
        "`[code, not a link](missing.md)`\n"
        "```\n[in a fence](missing.md)\n```\n"
    )
    assert broken_links([page], tmp_path) == [
        "page.md:4: other.md#a-section (no heading with this anchor)",
        "page.md:4: missing.md (no such file)",
    ]


def test_readme_and_docs_links_resolve() -> None:
    broken = broken_links(doc_files(), ROOT)
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("tree", ["src", "benchmarks", "tests", "docs"])
def test_named_docs_exist(tree: str) -> None:
    """A docstring, comment or doc citing docs/benchmarks.md or docs/investigations/ cites a file
    that exists (a topic file renamed or merged leaves no dangling citation)."""
    missing = []
    for path in sorted((ROOT / tree).rglob("*")):
        if path.suffix not in {".py", ".md", ".yaml", ".yml", ".sh"} or "__pycache__" in path.parts:
            continue
        for cited in set(DOC_PATH.findall(path.read_text(encoding="utf-8", errors="replace"))):
            if not (ROOT / cited).exists():
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert not missing, "\n".join(sorted(missing))
