"""Shared fixtures: the catalogue of example TensorDicts and a fixed seed."""

from __future__ import annotations

import pytest
import torch

from tests.catalogue import CATALOGUE


@pytest.fixture(autouse=True)
def _seed() -> None:
    torch.manual_seed(0)


@pytest.fixture(params=sorted(CATALOGUE))
def example(request: pytest.FixtureRequest):  # type: ignore[no-untyped-def]
    """Each TensorDict of the catalogue in turn."""
    return CATALOGUE[request.param]()


# tests/data holds golden checkpoints and the script that wrote them: not tests to import
collect_ignore = ["data"]
