#!/usr/bin/env bash
# Idempotent set-up: a virtual environment in .venv with torch==2.13.0 (CPU) first, then the project.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -x .venv/bin/python ]; then
    python3 -m venv .venv
fi
# torch is pinned and installed first: an unpinned resolve would pull the CUDA build.
if ! .venv/bin/python -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '2.13.0')" 2>/dev/null; then
    .venv/bin/pip install --quiet --disable-pip-version-check "torch==2.13.0"
fi
# A path-based editable install (compat mode): the package is found on sys.path, before any
# same-named folder in the working directory (the conformance harness runs from one).
.venv/bin/pip install --quiet --disable-pip-version-check -e ".[test,dev,docs]" --config-settings editable_mode=compat
