#!/usr/bin/env bash
# Set everything up, then run the whole check: pytest (tests, doctests, docs), ruff, mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
exec .venv/bin/python -m pytest "$@"
