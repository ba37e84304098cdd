#!/usr/bin/env bash
# Set everything up, then run the quick-start tour.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python examples/quickstart.py
