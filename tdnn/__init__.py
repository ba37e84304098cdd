"""tdnn: the module layer over tensordict (parameter swapping, ensembles, TensorDict modules).

Only the package skeleton exists so far; its contents arrive with the module-layer issue.
It imports public ``tensordict`` names only.
"""

__all__: list[str] = []
