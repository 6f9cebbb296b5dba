"""The originals of compacted tool outputs, kept in memory for `retrieve_tool_output`.

`ArtifactStore` is an LRU bounded by bytes: it holds originals by their artifact id (see
`toolscope_agent.engine.compaction.artifact_id`) until their UTF-8 sizes add up to more than
`max_bytes`, then forgets the least recently stored or read ones. An original larger than
`max_bytes` on its own is not kept (the server's copy, `GET /api/v1/artifacts/{id}`, still
answers for it). Thread-safe: the agent's threads may store and read at once.

A store answers whoever holds it, for any id it holds: share one between selectors only when they
may see each other's outputs (one tenant's sessions, say); by default each `ToolSelector` has
its own.
"""

from __future__ import annotations

import threading
from collections import OrderedDict

DEFAULT_MAX_BYTES = 16 * 1024 * 1024


class ArtifactStore:
    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be ≥ 0")
        self.max_bytes = max_bytes
        self._originals: OrderedDict[str, tuple[str, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, artifact_id: str, original: str) -> bool:
        """Keep `original` under `artifact_id`; False when it alone is larger than max_bytes."""
        size = len(original.encode("utf-8", "surrogatepass"))
        with self._lock:
            self._discard(artifact_id)
            if size > self.max_bytes:
                return False
            self._originals[artifact_id] = (original, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, evicted) = self._originals.popitem(last=False)
                self._bytes -= evicted
        return True

    def get(self, artifact_id: str) -> str | None:
        with self._lock:
            entry = self._originals.get(artifact_id)
            if entry is None:
                return None
            self._originals.move_to_end(artifact_id)
            return entry[0]

    def clear(self) -> None:
        with self._lock:
            self._originals.clear()
            self._bytes = 0

    def _discard(self, artifact_id: str) -> None:
        entry = self._originals.pop(artifact_id, None)
        if entry is not None:
            self._bytes -= entry[1]

    def __contains__(self, artifact_id: object) -> bool:
        with self._lock:
            return artifact_id in self._originals

    def __len__(self) -> int:
        with self._lock:
            return len(self._originals)

    @property
    def size_bytes(self) -> int:
        """UTF-8 bytes of the originals held now."""
        with self._lock:
            return self._bytes
