"""Fixtures of the SDK tests: a real local HTTP server and clients tuned to retry fast.

Nothing here needs Django or a database."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from toolscope_agent import Client

from tests.sdk.server import RecordingServer

API_KEY = "tsk_test_key"

FAST = {
    "flush_interval": 0.05,
    "backoff_base": 0.01,
    "backoff_max": 0.05,
    "timeout": 2.0,
    "shutdown_timeout": 2.0,
}


@pytest.fixture
def server() -> Iterator[RecordingServer]:
    running = RecordingServer().start()
    yield running
    running.stop()


@pytest.fixture
def make_client() -> Iterator[Callable[..., Client]]:
    clients: list[Client] = []

    def make(base_url: str, **options: Any) -> Client:
        client = Client(base_url, API_KEY, **{**FAST, **options})
        clients.append(client)
        return client

    yield make
    for client in clients:
        client.close(timeout=2)


@pytest.fixture
def client(server: RecordingServer, make_client: Callable[..., Client]) -> Client:
    return make_client(server.url)
