"""Repository-level pytest settings."""

import tempfile

import pytest

# tensordict/nn.py replaces itself with the tdnn package on import: not a module to
# collect doctests from (tests/test_layers.py checks the alias in a subprocess).
# docs/conf.py is Sphinx's configuration and docs/_build its output: not tests.
collect_ignore = ["tensordict/nn.py", "docs/conf.py", "docs/_build"]


@pytest.fixture(autouse=True)
def _temporary_files_under_pytest(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Docs examples and tests call ``tempfile.mkdtemp()`` freely: put those folders under
    pytest's own temporary root, which pytest prunes, instead of leaving them in /tmp."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path_factory.getbasetemp()))
