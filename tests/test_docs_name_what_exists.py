"""Every file and Python name the README and docs/ point a reader to exists (a moved module
leaves no stale path behind). The README's "Changes" section is left out: it names the old
paths on purpose."""

from __future__ import annotations

import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_TOP = "exporter|grafana|registry|rlvitals|tests|bench|calibration|examples|docs|provisioning"
_PATH = re.compile(rf"(?:`|\]\()((?:{_TOP})/[\w./-]*?)(?:`|\))")
_DOTTED = re.compile(r"`((?:exporter|grafana|registry|rlvitals)(?:\.\w+)+)`")
_DOCS = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]


def _text(doc: str) -> str:
    text = (ROOT / doc).read_text(encoding="utf-8")
    if doc == "README.md":
        text = re.sub(r"^## Changes\n.*?(?=^## )", "", text, flags=re.S | re.M)
    return text


def _resolves(dotted: str) -> bool:
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ModuleNotFoundError:
            continue
        for name in parts[cut:]:
            if not hasattr(obj, name):
                return False
            obj = getattr(obj, name)
        return True
    return False


@pytest.mark.parametrize("doc", _DOCS)
def test_paths_in_the_docs_exist(doc: str) -> None:
    missing = sorted({p for p in _PATH.findall(_text(doc)) if not (ROOT / p).exists()})
    assert not missing, f"{doc} names files that do not exist: {missing}"


@pytest.mark.parametrize("doc", _DOCS)
def test_python_names_in_the_docs_import(doc: str) -> None:
    missing = sorted({d for d in _DOTTED.findall(_text(doc)) if not _resolves(d)})
    assert not missing, f"{doc} names modules or attributes that do not exist: {missing}"


_LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = path.read_text(encoding="utf-8")
    headings = {_anchor(h) for h in re.findall(r"^#+ (.*)$", text, re.M)}
    return headings | set(re.findall(r'<a id="([^"]+)"', text))  # the generated pages' own


@pytest.mark.parametrize("doc", [*_DOCS, "CHANGELOG.md"])
def test_relative_links_in_the_docs_reach_a_file_and_heading(doc: str) -> None:
    """A link written relative to its page (`serve.md`, `../README.md#path-2-...`) opens a file
    that exists, at a heading it has: pages moved between the README and docs/ keep no dead link."""
    page = ROOT / doc
    broken = []
    for target in _LINK.findall(page.read_text(encoding="utf-8")):
        if re.match(r"[a-z]+:", target):  # http://, https://, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path).resolve() if path else page
        if not where.exists() or (
            anchor and where.suffix == ".md" and anchor not in _anchors(where)
        ):
            broken.append(target)
    assert not broken, f"{doc} links to what does not exist: {broken}"


def test_the_docs_index_lists_every_page() -> None:
    index = (ROOT / "docs" / "index.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"\]\(([\w.-]+\.md)\)", index))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages - listed == set(), f"docs/index.md does not list: {sorted(pages - listed)}"
    assert listed - pages == set(), f"docs/index.md lists pages that do not exist: {listed - pages}"
