"""toolscope's prompt-cache model (sdk/toolscope_agent/engine/cache.py) against what Anthropic
reported, request by request, on real Claude Code sessions nobody here recorded (issue 26, item 3:
"predicted cache reads equal reported ones on recordings whose provider reported them").

The recordings (tests/fixtures/claude_code/, README there): public Claude Code transcripts whose
every assistant line carries the API's `usage` (cache reads, 5-minute and 1-hour writes, uncached
input) and a timestamp, reduced to one line per API request. They carry no system prompt and no
tool definitions, so each request is rendered from the prompt size it reported, as the model
would see a growing conversation:

- the first request's prompt is one block; every later request is the request before it plus one
  block of what the conversation added (its reported prompt less the previous one). A prompt that
  shrank (Claude Code compacted the conversation) starts a new conversation;
- a breakpoint on the last block (Claude Code marks the conversation's last message), with the TTL
  the session writes with (1 hour when it reported 1-hour writes);
- sent at its timestamp.

What the model then predicts (reads, writes) is compared with what was reported. It cannot know a
prefix cached by another session (Claude Code's system prompt and tools are shared by every
session of an account: a session's first request often reads them), nor the few tokens Claude
Code leaves after its last breakpoint (reported as uncached `input_tokens`; the model counts them
as written, and the next request reads them): both are counted apart.

Run: .venv/bin/python bench/cache_agreement.py [files...]
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path[:0] = [str(HERE.parent / "sdk")]

from toolscope_agent.engine.cache import (  # noqa: E402
    FIVE_MINUTES,
    ONE_HOUR,
    Block,
    CacheUse,
    Request,
    predict,
    rules_for,
)

FIXTURES = HERE.parent / "tests" / "fixtures" / "claude_code"
CLOSE = 0.01  # a read within 1% of the reported one


@dataclass(frozen=True)
class Reported:
    at: float
    model: str
    use: CacheUse


def load(path: Path) -> list[Reported]:
    """The main conversation's API requests of a reduced recording, in order (sub-agents' requests,
    `isSidechain`, have their own prompts and caches: left out)."""
    requests = []
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if row["isSidechain"]:
            continue
        usage = row["usage"]
        creation = usage.get("cache_creation") or {}
        written = usage.get("cache_creation_input_tokens", 0)
        hour = creation.get("ephemeral_1h_input_tokens", 0)
        at = datetime.fromisoformat(row["timestamp"].replace("Z", "+00:00")).timestamp()
        requests.append(Reported(at, row["model"], CacheUse(
            read=usage.get("cache_read_input_tokens", 0), write=written - hour, write_1h=hour,
            uncached=usage.get("input_tokens", 0))))
    return requests


def rendered(requests: Sequence[Reported], *, tail: bool = False) -> list[Request]:
    """Each request as blocks built from the prompt sizes (see the module docstring). `tail`: the
    breakpoint goes before the request's reported uncached tokens, where Claude Code puts it (a
    calibration: the model's own default puts it on the last block)."""
    ttl = ONE_HOUR if any(request.use.write_1h for request in requests) else FIVE_MINUTES
    out: list[Request] = []
    history: list[Block] = []
    before = generation = 0
    for position, request in enumerate(requests):
        size = request.use.input_tokens
        if size < before:
            generation += 1
            history, before = [], 0
        after = min(request.use.uncached, size - before) if tail else 0
        if size - after > before:
            history.append(Block(f"{generation}:{position}", size - after - before, ttl=ttl))
        mark = len(history) - 1
        if after:
            history.append(Block(f"{generation}:{position}:tail", after, ttl=ttl))
        before = size
        out.append(Request(request.at, list(history), marks=(mark,)))
    return out


@dataclass
class Figures:
    requests: int = 0
    exact: int = 0
    close: int = 0
    reported_read: int = 0
    predicted_read: int = 0
    first_reads: int = 0  # a session's first request read a prefix another session cached
    misses_reported: int = 0  # requests after the first that reported no read at all
    misses_predicted: int = 0
    misses_both: int = 0
    off: Counter[str] = field(default_factory=Counter)


def compare(requests: Sequence[Reported], *, tail: bool = False) -> Figures:
    model = requests[0].model if requests else ""
    predicted = predict(rendered(requests, tail=tail), rules_for("anthropic", model))
    figures = Figures()
    for position, (request, use) in enumerate(zip(requests, predicted, strict=True)):
        reported = request.use.read
        if position == 0:
            figures.first_reads += reported > 0
            continue
        figures.requests += 1
        figures.reported_read += reported
        figures.predicted_read += use.read
        figures.exact += use.read == reported
        close = abs(use.read - reported) <= CLOSE * max(reported, 1)
        figures.close += close
        figures.misses_reported += reported == 0
        figures.misses_predicted += use.read == 0
        figures.misses_both += reported == 0 and use.read == 0
        if not close:
            gap = request.at - requests[position - 1].at
            figures.off["over: read more than reported" if use.read > reported else
                        "under: read less than reported"] += 1
            figures.off[f"gap {'> 5 min' if gap > FIVE_MINUTES else '<= 5 min'}"] += 1
    return figures


def main(paths: Sequence[str]) -> None:
    files = [Path(path) for path in paths] or sorted(FIXTURES.glob("*.jsonl"))
    for tail, title in ((False, "breakpoint on the last block (the model's default)"),
                        (True, "breakpoint before the reported uncached tail (Claude Code's placement)")):
        print(f"\n{title}\n")
        print("| recording | model | requests | within 1% | exact | reads reported | reads predicted "
              "| misses reported / predicted / both | first request read another session's cache |")
        print("| --- | --- | ---: | ---: | ---: | ---: | ---: | --- | --- |")
        total = Figures()
        for path in files:
            requests = load(path)
            found = compare(requests, tail=tail)
            print(f"| {path.stem} | {requests[0].model} | {found.requests} | {found.close / found.requests:.1%} "
                  f"| {found.exact / found.requests:.1%} | {found.reported_read:,} | {found.predicted_read:,} "
                  f"| {found.misses_reported} / {found.misses_predicted} / {found.misses_both} "
                  f"| {'yes' if found.first_reads else 'no'} |")
            for name in ("requests", "exact", "close", "reported_read", "predicted_read", "misses_reported",
                         "misses_predicted", "misses_both"):
                setattr(total, name, getattr(total, name) + getattr(found, name))
            total.off.update(found.off)
        print(f"\nall: {total.requests} requests, {total.close / total.requests:.1%} within 1% of the reported "
              f"read, {total.exact / total.requests:.1%} exact; reads {total.predicted_read:,} predicted against "
              f"{total.reported_read:,} reported ({total.predicted_read / total.reported_read - 1:+.2%})")
        print("not within 1%:", dict(total.off))


if __name__ == "__main__":
    main(sys.argv[1:])
