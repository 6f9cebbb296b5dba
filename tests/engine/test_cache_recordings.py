"""The cache model against what Anthropic reported on real Claude Code sessions nobody here
recorded (tests/fixtures/claude_code/; bench/cache_agreement.py renders each request from the
prompt size it reported and compares reads request by request)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "cache_agreement.py"
spec = importlib.util.spec_from_file_location("cache_agreement", BENCH)
assert spec is not None and spec.loader is not None
agreement = sys.modules.setdefault("cache_agreement", importlib.util.module_from_spec(spec))
spec.loader.exec_module(agreement)
RECORDINGS = sorted(agreement.FIXTURES.glob("*.jsonl"))


def test_the_recordings_are_there_and_whole():
    assert len(RECORDINGS) == 3
    assert [len(agreement.load(path)) for path in RECORDINGS] == [194, 107, 157]


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda path: path.stem)
def test_every_reported_cache_miss_is_predicted(path):
    """A request that read nothing (its cache expired, or the conversation was compacted) is one
    the model predicts reading nothing: the TTLs and their refresh hold on real traffic."""
    found = agreement.compare(agreement.load(path), tail=True)
    assert found.misses_both == found.misses_reported


@pytest.mark.parametrize("path", RECORDINGS, ids=lambda path: path.stem)
def test_reads_match_the_reported_ones_with_claude_codes_breakpoint(path):
    """With the breakpoint where Claude Code puts it (before the few tokens it leaves uncached),
    at least 94% of the reads equal the reported ones exactly, and the session's reads are within
    2% of the reported total. The rest: requests whose recorded time is the end of the previous
    response (a real gap shorter than recorded), prefixes other requests cached."""
    found = agreement.compare(agreement.load(path), tail=True)
    assert found.exact >= 0.9 * found.requests
    assert abs(found.predicted_read - found.reported_read) <= 0.02 * found.reported_read


def test_without_the_calibration_reads_are_still_within_one_percent():
    """The model's own placement (the last block) writes Claude Code's uncached tail and reads it
    next: a few tokens a request, so reads stay within 1% though rarely exact."""
    found = [agreement.compare(agreement.load(path)) for path in RECORDINGS]
    assert sum(f.close for f in found) >= 0.95 * sum(f.requests for f in found)
