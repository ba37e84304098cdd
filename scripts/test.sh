#!/usr/bin/env bash
# Set everything up, then run the whole check: ruff, mypy, the docs site (Sphinx, warnings as
# errors), then pytest (tests, doctests of the code and of docs/*.md, the examples).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
# A full rebuild every time (-E -a), so that warnings of unchanged pages are not hidden.
.venv/bin/python -m sphinx -E -a -W --keep-going -q -b html docs docs/_build/html
exec .venv/bin/python -m pytest "$@"
