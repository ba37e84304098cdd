"""Public face of the test helpers: ``from tensordict.testing import MyDistData``."""

from tensordict._testing_classes import MyDistData

__all__ = ["MyDistData"]
