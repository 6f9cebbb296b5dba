"""In-process caches bounded by bytes, not entries.

An entry-bounded cache is only as small as its entries: 256 definition texts of 3 MB each, kept
with what was parsed from them, held a web process at 600-990 MB (issue 24, item 6). Every cache
that lives as long as its process and holds text a client sent (tool definitions, descriptions,
catalogs, words, patterns) is a `ByteLRU` (least recently used entries go once the estimated size
of keys and values passes `max_bytes`) or, on hot paths with small entries, a `ByteDict` (read as
a plain dict, emptied when full); an entry larger than the bound alone is not kept.

`deep_size` is the estimate: what `sys.getsizeof` says of each object reached through
containers and instance attributes (NumPy arrays by their `nbytes`), each object counted once.
Thread-safe: web threads and an agent's threads share these caches.
"""

from __future__ import annotations

import functools
import sys
import threading
import types
from collections import OrderedDict
from collections.abc import Callable, Hashable, Mapping
from typing import Any, Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
F = TypeVar("F", bound=Callable[..., Any])

MISSING = _MISSING = object()  # ByteLRU.find's answer for a key it does not hold
_ATOMS = (str, bytes, bytearray, int, float, complex, bool, type(None))
# Shared by everyone, not held by an entry: never walked into.
_SHARED = (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType,
           functools.partial)


def deep_size(obj: Any) -> int:
    """Estimated bytes of `obj` and everything it holds (containers, instance attributes, slots)."""
    seen: set[int] = set()
    total = 0
    stack = [obj]
    while stack:
        item = stack.pop()
        if id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, _SHARED):
            continue
        total += sys.getsizeof(item, 64)
        if isinstance(item, _ATOMS):
            continue
        nbytes = getattr(item, "nbytes", None)
        if isinstance(nbytes, int):  # a NumPy array's buffer
            total += nbytes
            continue
        if isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set, frozenset)):
            stack.extend(item)
        else:
            attributes = getattr(item, "__dict__", None)
            if isinstance(attributes, dict):
                stack.append(attributes)
            for name in getattr(type(item), "__slots__", ()):
                if hasattr(item, name):
                    stack.append(getattr(item, name))
            pattern = getattr(item, "pattern", None)  # a compiled regex: its program grows with it
            if isinstance(pattern, str):
                total += 16 * len(pattern)
    return total


class _Hashed:
    """A key with its hash computed once: a catalog's key (thousands of names and descriptions)
    is looked up and then moved to the end, and a tuple does not keep its hash."""

    __slots__ = ("hash", "key")

    def __init__(self, key: Any) -> None:
        self.key = key
        self.hash = hash(key)

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Hashed) and self.key == other.key


class ByteLRU(Generic[K, V]):
    """A least-recently-used cache holding at most `max_bytes` of keys and values (estimated)."""

    def __init__(self, max_bytes: int, *, sizeof: Callable[[Any, Any], int] | None = None) -> None:
        if max_bytes < 0:
            raise ValueError("max_bytes must be ≥ 0")
        self.max_bytes = max_bytes
        self._sizeof = sizeof or (lambda key, value: deep_size(key) + deep_size(value))
        self._entries: OrderedDict[_Hashed, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = self.misses = 0

    def get(self, key: K) -> V | None:
        found = self.find(key)
        return None if found is _MISSING else found  # type: ignore[return-value]

    def find(self, key: K) -> V | object:
        """The value under `key`, or `MISSING` (a cached None is a value)."""
        hashed = _Hashed(key)
        with self._lock:
            entry = self._entries.get(hashed)
            if entry is None:
                self.misses += 1
                return _MISSING
            self.hits += 1
            self._entries.move_to_end(hashed)
            return entry[0]

    def __contains__(self, key: object) -> bool:
        hashed = _Hashed(key)
        with self._lock:
            return hashed in self._entries

    def put(self, key: K, value: V, size: int | None = None) -> V:
        """Keep `value` under `key` (its size estimated unless given); returns `value`, kept or
        not (one larger than max_bytes on its own is not)."""
        size = self._sizeof(key, value) if size is None else size
        hashed = _Hashed(key)
        with self._lock:
            old = self._entries.pop(hashed, None)
            if old is not None:
                self._bytes -= old[1]
            if size > self.max_bytes:
                return value
            self._entries[hashed] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes:
                _, (_, evicted) = self._entries.popitem(last=False)
                self._bytes -= evicted
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
            self.hits = self.misses = 0

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    @property
    def size_bytes(self) -> int:
        """The estimated bytes held now: never more than max_bytes."""
        with self._lock:
            return self._bytes

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"hits": self.hits, "misses": self.misses, "entries": len(self._entries),
                    "bytes": self._bytes, "max_bytes": self.max_bytes}


class ByteDict(dict[K, V]):
    """A dict that starts over when its entries' estimated bytes would pass `max_bytes`: for the
    hot paths' small entries (a word's term, a compiled pattern), read as a plain dict (`d[key]`,
    `d.get(key)`: no lock, no Python call) and filled with `add`. Clear, not evict: safe under
    threads, and rare."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__()
        self.max_bytes = max_bytes
        self.size_bytes = 0
        self._lock = threading.Lock()

    def add(self, key: K, value: V, size: int | None = None) -> V:
        """Keep `value` under `key` (unless it alone is larger than max_bytes); returns it."""
        size = deep_size(key) + deep_size(value) if size is None else size
        if size > self.max_bytes:
            return value
        with self._lock:
            if key not in self:
                if self.size_bytes + size > self.max_bytes:
                    super().clear()
                    self.size_bytes = 0
                self.size_bytes += size
            self[key] = value
        return value

    def clear(self) -> None:
        with self._lock:
            super().clear()
            self.size_bytes = 0


def byte_lru_cache(max_bytes: int) -> Callable[[F], F]:
    """functools.lru_cache bounded by bytes: the function's positional arguments are the key, and
    the arguments and result are what an entry weighs. The cache is the wrapper's `cache`."""

    def decorate(function: F) -> F:
        cache: ByteLRU[tuple[Any, ...], Any] = ByteLRU(max_bytes)

        @functools.wraps(function)
        def wrapper(*args: Any) -> Any:
            found = cache.find(args)
            if found is not MISSING:
                return found
            return cache.put(args, function(*args))

        wrapper.cache = cache  # type: ignore[attr-defined]
        wrapper.cache_clear = cache.clear  # type: ignore[attr-defined]
        return wrapper  # type: ignore[return-value]

    return decorate
