"""A disk spool for telemetry the server could not take (issue 27, item 5): while toolscope is
unreachable, each batch the exporter could not deliver is written to a directory as the gzip
body it would have POSTed, and sent again, oldest first, once the server answers. A process that
restarts finds the files and sends them first. Nothing seen is lost for as long as the spool
holds it.

- Order is kept: while anything is spooled, new batches join the spool behind it rather than
  overtake it (a session's start, with its agent and metadata, reaches the server before its
  calls; a turn's full tool definitions before the turns that name them by hash).
- Bounded: at most `max_bytes` on disk; past it the oldest files are deleted, their events
  counted as dropped and logged.
- A file is written under a temporary name and renamed, so a crash leaves no half file; ingest
  is idempotent by event id, so a batch sent twice (a crash between the server's answer and the
  file's removal) is stored once.
- One spool per directory and process: the directory is locked (flock) by the exporter that uses
  it; a second process with the same directory spools nothing and says so.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

logger = logging.getLogger("toolscope_agent")

DEFAULT_MAX_BYTES = 256 * 1024 * 1024
FILE = re.compile(r"^(\d{20})-(\d{6})-(\d+)\.json\.gz$")
_sequence = itertools.count()


@dataclass(frozen=True)
class Spooled:
    path: Path
    events: int
    size: int


class Spool:
    def __init__(self, directory: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                 quiet: bool = False) -> None:
        if max_bytes < 1024:
            raise ValueError("spool max_bytes must be at least 1024")
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock: IO[Any] | None = self._take_lock(quiet)
        self._files: list[Spooled] = self._scan() if self._lock is not None else []
        self.dropped = 0  # events deleted to keep within max_bytes

    @property
    def usable(self) -> bool:
        return self._lock is not None

    def _take_lock(self, quiet: bool) -> IO[Any] | None:
        handle = (self.directory / ".lock").open("a")
        try:
            import fcntl

            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except ImportError:  # pragma: no cover -- not POSIX: one process per directory, by convention
            return handle
        except OSError:
            handle.close()
            if quiet:
                return None
            logger.warning("toolscope: the spool directory %s is in use by another process; this one will not "
                           "spool (give each process its own directory)", self.directory)
            return None
        return handle

    def _scan(self) -> list[Spooled]:
        found = []
        for path in self.directory.iterdir():
            match = FILE.match(path.name)
            if match:
                found.append(Spooled(path, int(match.group(3)), path.stat().st_size))
            elif path.name.endswith(".tmp"):
                path.unlink(missing_ok=True)  # a write the process did not finish
        found.sort(key=lambda item: item.path.name)
        if found:
            logger.info("toolscope: %d events spooled by an earlier run in %s; sending them first",
                        sum(item.events for item in found), self.directory)
        return found

    @property
    def pending(self) -> bool:
        return bool(self._files)

    @property
    def events(self) -> int:
        return sum(item.events for item in self._files)

    @property
    def size(self) -> int:
        return sum(item.size for item in self._files)

    def add(self, content: bytes, events: int) -> None:
        """Spool one gzip body of `events` events, after every file already there."""
        if self._lock is None:
            raise OSError("the spool directory is in use by another process")
        name = f"{time.time_ns():020d}-{next(_sequence) % 1_000_000:06d}-{events}.json.gz"
        path = self.directory / name
        temporary = path.with_name(name + ".tmp")
        with temporary.open("wb") as handle:
            handle.write(content)
            handle.flush()
            os.fsync(handle.fileno())
        temporary.rename(path)
        self._files.append(Spooled(path, events, len(content)))
        self._keep_within_bound()

    def oldest(self) -> tuple[Spooled, bytes] | None:
        while self._files:
            item = self._files[0]
            try:
                return item, item.path.read_bytes()
            except FileNotFoundError:  # removed by hand: nothing to send
                self._files.pop(0)
        return None

    def remove(self, item: Spooled) -> None:
        with contextlib.suppress(ValueError):
            self._files.remove(item)
        item.path.unlink(missing_ok=True)

    def _keep_within_bound(self) -> None:
        total = self.size
        while total > self.max_bytes and len(self._files) > 1:
            item = self._files.pop(0)
            item.path.unlink(missing_ok=True)
            total -= item.size
            self.dropped += item.events
            logger.error("toolscope: the spool in %s is over %d bytes; its oldest %d events are dropped",
                         self.directory, self.max_bytes, item.events)

    @classmethod
    def in_free_directory(cls, base: str | os.PathLike[str], *, max_bytes: int = DEFAULT_MAX_BYTES,
                          slots: int = 16) -> Spool | None:
        """The spool in `base`, or in `base-2`, `base-3`… when another running process holds it
        (several gateways started from one configuration): a restarted process takes the first
        free one, which holds what the run before it left. None when all `slots` are taken."""
        for slot in range(1, slots + 1):
            directory = Path(base) if slot == 1 else Path(f"{base}-{slot}")
            spool = cls(directory, max_bytes=max_bytes, quiet=True)
            if spool.usable:
                return spool
        logger.warning("toolscope: every spool directory %s… is in use; telemetry is not spooled", base)
        return None

    def close(self) -> None:
        if self._lock is not None:
            self._lock.close()
            self._lock = None
