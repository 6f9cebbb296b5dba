"""Cost of one compact() call (toolscope_agent.engine.compaction) on typical oversized outputs.

Inputs, generated deterministically:
- log:  a 20 KB shell log (a build with test results, warnings repeated in runs, a traceback);
- json: a 50 KB JSON API response (a page of 120 records with nested objects, pretty-printed).

Each is compacted to a quarter of its size in tokens with two injected counters:
- chars/4:    (len(text) + 3) // 4, constant time, so the figure is the engine's own overhead;
- whitespace: len(text.split()), linear in the text like a real tokenizer (though far faster).

Prints, per input x strategy x counter: tokens before -> after, calls to the counter, the
characters they were given, and µs per compact() call (median and min over --repeat runs).

Run: .venv/bin/python bench/compaction_speed.py [--repeat 200]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time
from collections.abc import Callable

from toolscope_agent.engine.compaction import compact


def chars4(text: str) -> int:
    return (len(text) + 3) // 4


def whitespace(text: str) -> int:
    return len(text.split())


COUNTERS: dict[str, Callable[[str], int]] = {"chars/4": chars4, "whitespace": whitespace}


def shell_log(size: int = 20_000) -> str:
    rng = random.Random(7)
    lines = ["$ make build test", "mkdir -p build/obj"]
    i = 0
    while sum(len(line) + 1 for line in lines) < size * 0.8:
        i += 1
        module = f"src/{rng.choice(['core', 'api', 'net', 'db', 'ui'])}/module_{i:03d}.c"
        lines.append(f"cc -O2 -Wall -Iinclude -c {module} -o build/obj/module_{i:03d}.o")
        if i % 9 == 0:
            lines += [f"{module}:{rng.randint(10, 900)}:5: warning: unused variable 'tmp' [-Wunused-variable]"] * 4
        if i % 5 == 0:
            lines.append(f"PASSED tests/test_module_{i:03d}.py::test_roundtrip[{rng.randint(0, 99)}] "
                         f"({rng.randint(1, 400)} ms)")
    lines.append("Traceback (most recent call last):")
    lines += ['  File "tests/test_parser.py", line 88, in walk', "    return walk(node.child)"] * 20
    lines.append("RecursionError: maximum recursion depth exceeded while calling a Python object")
    while sum(len(line) + 1 for line in lines) < size:
        lines.append(f"FAILED tests/test_parser.py::test_walk[{len(lines)}] - RecursionError")
    return "\n".join(lines)[:size] + "\n"


def json_response(size: int = 50_000) -> str:
    rng = random.Random(11)
    records = []
    for i in range(120):
        address = {"city": rng.choice(["Lyon", "Oslo", "Austin"]), "zip": f"{rng.randint(0, 99999):05d}"}
        records.append({
            "id": f"ord_{i:05d}", "status": rng.choice(["paid", "open", "void"]), "amount": rng.randint(100, 99_999),
            "customer": {"id": f"cus_{rng.randint(0, 9999):04d}", "email": f"user{i}@example.com", "address": address},
            "lines": [{"sku": f"SKU-{rng.randint(0, 999):03d}", "qty": rng.randint(1, 5)}
                      for _ in range(rng.randint(1, 4))],
            "note": " ".join(rng.choice(["fast", "gift", "fragile", "express"]) for _ in range(rng.randint(0, 30))),
        })
    document = {"object": "list", "url": "/v1/orders", "has_more": True, "data": records}
    while len(text := json.dumps(document, indent=2)) > size:
        records.pop()
    return text


def measure(text: str, strategy: str, count: Callable[[str], int], budget: int, repeat: int) -> dict[str, float]:
    calls = chars = 0

    def counting(candidate: str) -> int:
        nonlocal calls, chars
        calls += 1
        chars += len(candidate)
        return count(candidate)

    result = compact(text, strategy=strategy, max_tokens=budget, count=counting)
    times = []
    for _ in range(repeat):
        start = time.perf_counter_ns()
        compact(text, strategy=strategy, max_tokens=budget, count=count)
        times.append((time.perf_counter_ns() - start) / 1000)
    return {"before": result.tokens_before, "after": result.tokens_after, "used": result.strategy, "calls": calls,
            "chars": chars, "median": statistics.median(times), "min": min(times)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=200)
    args = parser.parse_args()
    inputs = {"log 20 KB": (shell_log(), ["head_tail", "dedupe_lines"]),
              "json 50 KB": (json_response(), ["json_prune", "head_tail"])}
    print(f"{'input':<11} {'strategy':<13} {'counter':<10} {'tokens':>13} {'calls':>5} {'chars':>8} "
          f"{'median µs':>10} {'min µs':>9}  result")
    for name, (text, strategies) in inputs.items():
        for strategy in strategies:
            for counter_name, count in COUNTERS.items():
                budget = max(64, count(text) // 4)
                row = measure(text, strategy, count, budget, args.repeat)
                print(f"{name:<11} {strategy:<13} {counter_name:<10} {row['before']:>6}→{row['after']:<6} "
                      f"{row['calls']:>5} {row['chars']:>8} {row['median']:>10.0f} {row['min']:>9.0f}  {row['used']}")


if __name__ == "__main__":
    main()
