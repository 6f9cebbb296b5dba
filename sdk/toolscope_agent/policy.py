"""PolicyCache: the project's published policy, always at hand without ever stalling the agent.

- `get()` returns at once from memory; when the copy is older than `ttl` it starts one background
  revalidation (`If-None-Match`: a 304 only refreshes the timestamp).
- The first `get()` of a process reads the last-known-good copy from disk if there is one, and
  otherwise fetches, waiting at most `timeout` seconds.
- With the server unreachable, the last good copy is kept (in memory and on disk); with nothing
  ever fetched, a built-in default applies: every tool, duplicates suppressed, no compaction.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Literal

import httpx

from toolscope_agent._http import server_message
from toolscope_agent._version import __version__
from toolscope_agent.engine.search import DEFAULT_RANKER

logger = logging.getLogger("toolscope_agent")

Source = Literal["server", "disk", "default"]

DEFAULT_POLICY: dict[str, Any] = {
    "schema_version": 1,
    "version": 0,
    "etag": None,
    "selection": {"mode": "all", "allowed": None, "always_on": [], "groups": {}, "context_rules": [],
                  "progressive": {"hint_prefix": "$"},
                  "tool_search": {"top_k": 8, "max_top_k": 20, "ranker": DEFAULT_RANKER},
                  "sticky_discovered": True},
    "outputs": {"duplicates": {"suppress": True}, "compaction": []},
    "tools": {},
}


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "toolscope"


class PolicyCache:
    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        label: str = "production",
        ttl: float = 60.0,
        timeout: float = 2.0,
        cache_dir: str | Path | None = None,
        default: dict[str, Any] | None = None,
        http_client: httpx.Client | None = None,
    ) -> None:
        if ttl < 0 or timeout <= 0:
            raise ValueError("ttl must be ≥ 0 and timeout > 0")
        self.label, self.ttl, self.timeout = label, ttl, timeout
        self._url = base_url.rstrip("/") + "/api/v1/policy"
        self._headers = {"Authorization": f"Bearer {api_key}", "User-Agent": f"toolscope-agent/{__version__}"}
        # One file per server, key and label; the key is hashed so it never lands on disk.
        digest = hashlib.sha256(f"{self._url}|{api_key}|{label}".encode()).hexdigest()[:16]
        self.path = Path(cache_dir) if cache_dir is not None else default_cache_dir()
        self.path = self.path / f"policy-{digest}.json"
        self._default = default if default is not None else DEFAULT_POLICY
        self._http = http_client or httpx.Client(timeout=timeout)
        self._lock = threading.Lock()
        self._refreshing = False
        self._document: dict[str, Any] | None = None
        self._checked_at = 0.0
        self.source: Source = "default"

    # -- reading ------------------------------------------------------------------------------

    def get(self) -> dict[str, Any]:
        """The policy to apply now. Never waits longer than `timeout`, and only on first use."""
        if self._document is None:
            self._first_load()
        elif time.monotonic() - self._checked_at >= self.ttl:
            self._refresh_in_background()
        return self._document if self._document is not None else self._default

    @property
    def etag(self) -> str | None:
        document = self._document
        return document.get("etag") if document else None

    def _first_load(self) -> None:
        with self._lock:
            if self._document is not None:
                return
            document = self._read_disk()
            if document is not None:
                self._document, self.source = document, "disk"
        if self._document is None:
            self.refresh()
        else:
            self._refresh_in_background()

    # -- revalidation -------------------------------------------------------------------------

    def refresh(self) -> bool:
        """Revalidate now (blocking, at most `timeout`). True when the server answered."""
        headers = dict(self._headers)
        if self.etag:
            headers["If-None-Match"] = self.etag
        try:
            response = self._http.get(self._url, params={"label": self.label}, headers=headers, timeout=self.timeout)
        except httpx.HTTPError as exc:
            logger.warning("toolscope policy fetch failed (%s); keeping the %s copy", exc, self.source)
            return False
        if response.status_code == 304:
            self._checked_at = time.monotonic()
            return True
        if response.status_code != 200:
            logger.warning("toolscope policy fetch answered %s (%s); keeping the %s copy", response.status_code,
                           server_message(response), self.source)
            return False
        document = response.json()
        with self._lock:
            self._document, self.source, self._checked_at = document, "server", time.monotonic()
        self._write_disk(document)
        return True

    def _refresh_in_background(self) -> None:
        with self._lock:
            if self._refreshing:
                return
            self._refreshing = True
            # Until it answers, the current copy counts as fresh: one revalidation at a time.
            self._checked_at = time.monotonic()
        threading.Thread(target=self._background, name="toolscope-policy", daemon=True).start()

    def _background(self) -> None:
        try:
            self.refresh()
        finally:
            with self._lock:
                self._refreshing = False

    # -- last-known-good copy ---------------------------------------------------------------

    def _read_disk(self) -> dict[str, Any] | None:
        try:
            document = json.loads(self.path.read_text())
        except (OSError, ValueError):
            return None
        return document if isinstance(document, dict) and "selection" in document else None

    def _write_disk(self, document: dict[str, Any]) -> None:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd, temporary = tempfile.mkstemp(dir=self.path.parent, prefix=".policy-")
            with os.fdopen(fd, "w") as handle:
                json.dump(document, handle)
            os.replace(temporary, self.path)
        except OSError as exc:  # a read-only home must not break the agent
            logger.warning("could not keep the policy on disk at %s: %s", self.path, exc)

    def close(self) -> None:
        self._http.close()
