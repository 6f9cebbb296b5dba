"""Command one of the README: with no configuration, toolscope boots on SQLite with eager tasks,
migrates, seeds the demo project, and serves the admin to the login it printed."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

REPO = Path(__file__).resolve().parents[2]
CONFIG_VARIABLES = ("DATABASE_URL", "CELERY_BROKER_URL", "CELERY_RESULT_BACKEND", "CACHE_URL", "TOOLSCOPE_ENV")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(url: str, process: subprocess.Popen, log: Path, timeout: float = 60) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"demo exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            return httpx.get(url, timeout=2)
        except httpx.TransportError:
            time.sleep(0.3)
    pytest.fail(f"{url} did not answer in {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.fixture
def demo_server(tmp_path):
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if k not in CONFIG_VARIABLES}
    env.update(PORT=str(port), TOOLSCOPE_SQLITE_PATH=str(tmp_path / "toolscope.sqlite3"))
    log = tmp_path / "demo.log"
    with log.open("w") as out:
        process = subprocess.Popen(
            [str(REPO / "scripts" / "demo")], cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        _wait_for(f"http://127.0.0.1:{port}/healthz", process, log, timeout=120)
        yield f"http://127.0.0.1:{port}", log
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=10)


@pytest.mark.slow
def test_demo_boots_on_sqlite_with_eager_tasks_and_serves_the_admin(demo_server):
    base, log = demo_server
    output = log.read_text()
    assert f"{base}/" in output
    login = re.search(r"Admin login: (\S+) / (\S+)", output)
    assert login, output

    key = re.search(r"API key \([^)]*\): (\S+)", output)
    assert key, output
    # The demo's learned search history, learned on SQLite, is served with its policy.
    policy = httpx.get(f"{base}/api/v1/policy?label=production", headers={"Authorization": f"Bearer {key[1]}"},
                       timeout=10).json()
    assert policy["selection"]["tool_search"]["ranker"] == "bm25f-2" and policy["search_history"]["tools"]

    ready = httpx.get(f"{base}/readyz", timeout=5).json()
    assert ready["checks"]["database"]["vendor"] == "sqlite"
    assert ready["checks"]["broker"]["mode"] == "eager"

    with httpx.Client(base_url=base, timeout=10, follow_redirects=True) as browser:
        page = browser.get("/admin/login/")
        token = browser.cookies["csrftoken"]
        page = browser.post(
            "/admin/login/?next=/admin/",
            data={"username": login[1], "password": login[2], "csrfmiddlewaretoken": token},
            headers={"Referer": f"{base}/admin/login/"},
        )
        assert page.status_code == 200
        assert "Log out" in page.text or "logout" in page.text
        sessions = browser.get("/admin/telemetry/session/")
        assert sessions.status_code == 200
        assert "demo-s0001" in sessions.text or re.search(r"\d+ sessions", sessions.text)
