"""The docs site's inputs: every public name has a docstring for the API reference, every
code block of a page is a doctest, and every page is reachable from the index."""

from __future__ import annotations

import pathlib
import re

import pytest

import tdnn
import tensordict

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"
PAGES = sorted(DOCS.glob("*.md"))
PUBLIC = [(tensordict, name) for name in tensordict.__all__] + [
    (tdnn, name) for name in tdnn.__all__
]
FENCE = re.compile(r"^```(?P<info>[^\n`]*)\n(?P<body>.*?)^```\s*$", re.MULTILINE | re.DOTALL)


def _own_doc(obj: object) -> str:
    doc = obj.__dict__.get("__doc__") if isinstance(obj, type) else obj.__doc__
    return doc or ""


@pytest.mark.parametrize(("module", "name"), PUBLIC, ids=[f"{m.__name__}.{n}" for m, n in PUBLIC])
def test_public_name_has_docstring(module: object, name: str) -> None:
    # (NestedKey too: a class at run time, whose docstring autodoc reads)
    assert _own_doc(getattr(module, name)).strip(), f"{module}.{name} has no docstring"


@pytest.mark.parametrize("page", PAGES, ids=[p.name for p in PAGES])
def test_code_blocks_are_doctests(page: pathlib.Path) -> None:
    # a block is a doctest (``>>>``), a Sphinx directive (``{toctree}``) or marked as
    # plain text (a folder layout); nothing is shown as code without being run
    blocks = list(FENCE.finditer(page.read_text()))
    for block in blocks:
        info = block["info"].strip()
        if info.startswith("{") or info == "text":
            continue
        assert re.search(r"^>>> ", block["body"], re.MULTILINE), (
            f"{page.name}: a ```{info} block has no >>> example:\n{block['body'][:200]}"
        )


def test_index_lists_every_page() -> None:
    index = (DOCS / "index.md").read_text()
    entries = set()
    for block in FENCE.finditer(index):
        if block["info"].strip() == "{toctree}":
            entries |= {
                line.strip()
                for line in block["body"].splitlines()
                if line.strip() and not line.startswith(":")
            }
    assert entries == {p.stem for p in PAGES if p.stem != "index"}
