"""The heartbeat watch of ``--peers.*``, over a store held in memory: who it gives up on."""

import contextlib
import threading
import time

import pytest

import seqcls.run.stops.lost_peers as lost_peers


class Store:
    """The calls of a rendezvous store the watch makes, over a dict; ``down``: every call fails."""

    def __init__(self) -> None:
        self.values: dict[str, bytes] = {}
        self.down = False

    def _answer(self) -> None:
        if self.down:
            raise RuntimeError("connect() timed out")

    def set(self, key: str, value: str) -> None:
        self._answer()
        self.values[key] = value.encode()

    def check(self, keys: list[str]) -> bool:
        self._answer()
        return all(key in self.values for key in keys)

    def get(self, key: str) -> bytes:
        self._answer()
        return self.values[key]


class GaveUp(Exception):
    pass


@pytest.fixture
def given_up(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """What the watch gave up on, where it would have ended the process."""
    seen: list[str] = []

    def give_up(rank: int, silent: str, silent_seconds: float) -> None:
        seen.append(silent)
        raise GaveUp

    monkeypatch.setattr(lost_peers, "_give_up", give_up)
    return seen


def run_watch(store: Store, world: int, seconds: float) -> threading.Event:
    stop = threading.Event()
    thread = threading.Thread(target=lambda: _watch_quietly(store, world, stop), daemon=True)
    thread.start()
    thread.join(timeout=seconds)
    stop.set()
    thread.join(timeout=5)
    return stop


def _watch_quietly(store: Store, world: int, stop: threading.Event) -> None:
    with contextlib.suppress(GaveUp):
        lost_peers.watch(store, 0, world, 2.0, stop)


def test_a_peer_whose_heartbeat_stops_is_given_up_on(given_up: list[str]) -> None:
    store = Store()
    store.set("seqcls/peers/beat/1", "1")  # one beat, then silence
    run_watch(store, 2, seconds=8)
    assert given_up == ["process 1"]


def test_a_peer_that_beats_or_is_done_is_not(given_up: list[str]) -> None:
    store = Store()
    store.set("seqcls/peers/done/2", "1")  # finished its part, then stopped beating
    beating = threading.Event()

    def beat() -> None:
        count = 0
        while not beating.wait(0.5):
            count += 1
            store.set("seqcls/peers/beat/1", str(count))

    threading.Thread(target=beat, daemon=True).start()
    started = time.monotonic()
    stop = run_watch(store, 3, seconds=5)
    beating.set()
    assert given_up == []
    assert stop.is_set()
    assert time.monotonic() - started >= 5
    assert store.values["seqcls/peers/done/0"] == b"1"  # said it is done when stopped


def test_a_store_that_stops_answering_is_given_up_on(given_up: list[str]) -> None:
    store = Store()
    store.down = True
    run_watch(store, 2, seconds=8)
    assert given_up == ["the run's store (on node 0)"]
