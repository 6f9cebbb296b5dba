"""Tool call durations as mergeable quantile sketches (DDSketch).

Each ToolHourly row keeps its hour's durations as DDSketch bins: `{"<key>": count}`, where the
key is the bucket `ddsketch`'s logarithmic mapping puts a duration in, and "z" counts durations
of zero. Bins are counts, so a sketch is a sum like the rollups' other figures: processing adds a
batch's new durations to its hours' bins (and could take one back), the pages merge hours or days
by adding bins (in SQL: `bins_sum`), and a rebuild recomputes an hour's bins from the raw rows.

The guarantee (DDSketch, Masson et al., VLDB 2019): with relative accuracy a = RELATIVE_ACCURACY,
the q-quantile a sketch returns is within a relative a of the exact value of rank floor(q * (n - 1))
among its n durations, however many durations and hours were merged. PostgreSQL's
percentile_cont(q) interpolates between that value and the next one up; on real traffic both are
within the stated error of each other, and the sketch's figure never strays further.

With a = 1% the buckets grow by 2% each: durations from 1 ms to 10 minutes span 670 buckets at
most, and an hour of one tool's calls typically fills 100 to 300.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from ddsketch.ddsketch import BaseDDSketch
from ddsketch.mapping import LogarithmicMapping
from ddsketch.store import DenseStore

RELATIVE_ACCURACY = 0.01
MAPPING = LogarithmicMapping(RELATIVE_ACCURACY)
ZERO = "z"
FRACTIONS = (0.5, 0.95)

Bins = dict[str, int]


def bin_key(duration_ms: float) -> str:
    """The bin a duration counts in (durations are never negative: ingest refuses them)."""
    if duration_ms <= MAPPING.min_possible:
        return ZERO
    return str(MAPPING.key(duration_ms))


def bins_of(durations: Iterable[float]) -> Bins:
    return dict(Counter(bin_key(duration) for duration in durations))


def bins_add(bins: Mapping[str, int], delta: Mapping[str, int]) -> Bins:
    """`bins` plus `delta` (whose counts may be negative), bins left empty dropped. A count never
    goes below zero: taking back a duration a sketch does not hold (a hand-edited row) is ignored."""
    merged = dict(bins)
    for key, count in delta.items():
        total = merged.get(key, 0) + count
        if total > 0:
            merged[key] = total
        else:
            merged.pop(key, None)
    return merged


def sketch(bins: Mapping[str, int]) -> BaseDDSketch:
    """The ddsketch object holding these bins, for its quantile queries."""
    store = DenseStore()
    for key, count in bins.items():
        if key != ZERO and count > 0:
            store.add(int(key), count)
    return BaseDDSketch(mapping=MAPPING, store=store, negative_store=DenseStore(),
                        zero_count=max(bins.get(ZERO, 0), 0))


def quantiles(bins: Mapping[str, int], fractions: Sequence[float] = FRACTIONS) -> tuple[float | None, ...]:
    """The sketch's value at each fraction; None for an empty sketch."""
    if not any(count > 0 for count in bins.values()):
        return tuple(None for _ in fractions)
    merged = sketch(bins)
    return tuple(merged.get_quantile_value(fraction) for fraction in fractions)
