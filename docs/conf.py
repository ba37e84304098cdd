"""Sphinx configuration: the Markdown pages in docs/ (MyST) and an autodoc API reference."""

from __future__ import annotations

import pathlib
import sys

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # document this checkout, installed or not

project = "tensordict"
author = "the tensordict contributors"
copyright = "the tensordict contributors"

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
root_doc = "index"

# The docstrings are reStructuredText with ``>>>`` examples; show them as written.
autodoc_default_options = {
    "members": True,
    "inherited-members": "Tensor,TensorBase,Module,Distribution,OneHotCategorical,object",
}
autodoc_member_order = "alphabetical"
autodoc_typehints = "description"
autodoc_typehints_format = "short"
autodoc_inherit_docstrings = True
autoclass_content = "class"

myst_heading_anchors = 3
suppress_warnings: list[str] = []

html_theme = "alabaster"
html_title = "tensordict"
html_static_path: list[str] = []
