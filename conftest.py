"""Repository-level pytest settings."""

# tensordict/nn.py replaces itself with the tdnn package on import: not a module to
# collect doctests from (tests/test_layers.py checks the alias in a subprocess).
# docs/conf.py is Sphinx's configuration and docs/_build its output: not tests.
collect_ignore = ["tensordict/nn.py", "docs/conf.py", "docs/_build"]
