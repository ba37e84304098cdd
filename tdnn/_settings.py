"""Process-wide settings held in one-item lists, with per-thread overrides (thread_local=True)."""

from __future__ import annotations

import threading
from typing import Any


class _Local:
    """The truthy marker a setting's list holds while some thread overrides it: hot paths
    that test the list (``if SKIP_EXISTING[0]``) then ask :meth:`Setting.get`."""

    __slots__ = ()

    def __bool__(self) -> bool:
        return True

    def __repr__(self) -> str:
        return "<thread-local setting>"


LOCAL = _Local()


class Setting:
    """One setting: ``slot[0]`` is its value for every thread, or :data:`LOCAL` while a
    thread-local override is active somewhere (then ``shared`` holds the process value)."""

    def __init__(self, slot: list[Any]) -> None:
        self.slot = slot
        self.shared: Any = None
        self.users = 0
        self.tls = threading.local()
        self.lock = threading.Lock()

    def get(self) -> Any:
        """The value in force in the calling thread."""
        value = self.slot[0]
        if value is not LOCAL:
            return value
        stack = getattr(self.tls, "stack", None)
        return stack[-1] if stack else self.shared

    def set_global(self, value: Any) -> Any:
        """Set the process-wide value; return the one it replaced."""
        with self.lock:
            if self.slot[0] is LOCAL:
                previous, self.shared = self.shared, value
            else:
                previous, self.slot[0] = self.slot[0], value
        return previous

    def push_local(self, value: Any) -> None:
        """Override the value in the calling thread until :meth:`pop_local`."""
        stack = getattr(self.tls, "stack", None)
        if stack is None:
            stack = self.tls.stack = []
        stack.append(value)
        with self.lock:
            if self.users == 0:
                self.shared, self.slot[0] = self.slot[0], LOCAL
            self.users += 1

    def pop_local(self) -> None:
        """Undo the calling thread's last :meth:`push_local`."""
        self.tls.stack.pop()
        with self.lock:
            self.users -= 1
            if self.users == 0:
                self.slot[0] = self.shared
