"""What /proc says of a process: the stack test (tests/deploy/test_attacks.py) and bench/attacks.py
watch granian's web workers with these."""

from __future__ import annotations

from pathlib import Path


def children(pid: int) -> set[int]:
    """The processes `pid` started (granian's workers)."""
    try:
        return {int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()}
    except (FileNotFoundError, ProcessLookupError):
        return set()


def rss_bytes(pid: int) -> int:
    """The resident set of `pid` now (0 once it has gone)."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    except (FileNotFoundError, ProcessLookupError):
        pass
    return 0
