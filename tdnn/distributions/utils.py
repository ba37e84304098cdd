"""``tensordict.nn.distributions.utils``: upstream's module path (no public names)."""

__all__: list[str] = []
