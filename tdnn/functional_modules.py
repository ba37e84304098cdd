"""``tensordict.nn.functional_modules``: upstream's module path (its functional API is
``TensorDict.from_module`` / ``to_module``; nothing else lives here)."""

__all__: list[str] = []
