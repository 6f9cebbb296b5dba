"""Speed and precision of redaction (toolscope_agent.engine.redaction), old rules against new.

"old" is the hand-written rule list as of a given commit (default cff79b5, before gitleaks'
rules), loaded from git into its own module so both run in the same process on the same input.

Speed inputs, generated deterministically or read from this machine's Python:
- small:  200 short tool outputs (~150 characters, a few with secrets), one redact_text each;
- event:  a tool_call event as ingest redacts it (arguments, output, error), redact_value;
- batch:  bench/ingest_throughput.py's 500-event request (2 KB outputs), every event as ingest
          redacts it (new: ids as identifiers, the rest as values; old: redact_value);
- log:    a 20 KB shell log with a key and a password in it;
- source: the standard library's .py files (about 20 MB, no secrets), one redact_text per file.
Prints µs per call (median of --repeat runs) and MB/s.

Precision (--precision): the files of the standard library and of this venv's packages whose
text redaction changes, per rule, with examples. Issue 12 asks for 0 on secret-free text.

Run: .venv/bin/python bench/redaction_speed.py [--repeat 5] [--old-commit cff79b5] [--precision]
"""

from __future__ import annotations

import argparse
import collections
import importlib.util
import json
import random
import statistics
import subprocess
import sys
import sysconfig
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

from toolscope_agent.engine import redaction as new
from toolscope_agent.engine.secret_rules import finding_span

ROOT = Path(__file__).resolve().parent.parent
STDLIB = Path(sysconfig.get_paths()["stdlib"])
SKIP = ("test/", "site-packages/", "idlelib/idle_test/", "lib2to3/tests/")


def load_old(commit: str) -> types.ModuleType:
    source = subprocess.run(["git", "-C", str(ROOT), "show", f"{commit}:sdk/toolscope_agent/engine/redaction.py"],
                            check=True, capture_output=True, text=True).stdout
    spec = importlib.util.spec_from_loader("old_redaction", loader=None)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_redaction"] = module
    exec(compile(source, "old_redaction.py", "exec"), module.__dict__)  # noqa: S102 - our own file from git
    return module


def stdlib_texts() -> list[str]:
    texts = []
    for path in sorted(STDLIB.rglob("*.py")):
        if not path.relative_to(STDLIB).as_posix().startswith(SKIP):
            texts.append(path.read_text(encoding="utf-8", errors="replace"))
    return texts


def inputs() -> dict[str, list[object]]:
    key = "ghp" + "_" + "R7t2Yq9W3e5U8i1O4p6A0s2D4f6G8h0J1k3L"
    small = [f"$ ls src/module_{i}\nmodule_{i}.py  test_module_{i}.py  README.md\nexit status 0" for i in range(195)]
    small += [f"export GITHUB_TOKEN={key}" for _ in range(5)]
    log = "\n".join(f"[{i:05d}] INFO build step {i} ok: compiled 12 files in 0.{i % 10}s" for i in range(330))
    log += f"\nERROR auth failed with token {key}\npassword: hunter2hunter2\n"
    event = {"arguments": {"command": "pytest -q tests/", "env": {"CI": "1"}, "password": "x"},
             "output": log[:4000], "error": "", "tool_name": "bash", "id": "s-1:call_7"}
    sys.path.insert(0, str(ROOT / "bench"))
    from ingest_throughput import body_template

    batch = json.loads(body_template(random.Random(7)))["events"]
    return {"small": list(small), "event": [event], "batch": batch, "log": [log], "source": list(stdlib_texts())}


IDS = ("id", "session_id", "call_id", "tool_name")


def new_event(event: dict[str, Any]) -> dict[str, Any]:
    """What toolscope/telemetry/services/redact.py does to an event, without Django."""
    return {name: new.redact_identifier(value, max_length=200) if name in IDS else new.redact_value(value)
            for name, value in event.items()}


def run(function: Callable[[object], object], items: list[object], repeat: int) -> float:
    timings = []
    for _ in range(repeat):
        start = time.perf_counter()
        for item in items:
            function(item)
        timings.append(time.perf_counter() - start)
    return statistics.median(timings)


def speed(old: types.ModuleType, repeat: int) -> None:
    new.redact_text("warm up the rule set: sk-proj-abc")
    print(f"{'input':8} {'calls':>6} {'MB':>7} {'old µs/call':>12} {'new µs/call':>12} {'old MB/s':>9} {'new MB/s':>9}")
    for name, items in inputs().items():
        size = sum(len(str(i)) for i in items) / 1e6
        functions = ((old.redact_value, new.redact_value) if name == "event"
                     else (old.redact_value, new_event) if name == "batch"
                     else (old.redact_text, new.redact_text))
        seconds = [run(f, items, repeat if name != "source" else max(1, repeat // 3)) for f in functions]
        per_call = [s / len(items) * 1e6 for s in seconds]
        print(f"{name:8} {len(items):>6} {size:>7.2f} {per_call[0]:>12.1f} {per_call[1]:>12.1f} "
              f"{size / seconds[0]:>9.1f} {size / seconds[1]:>9.1f}")


def precision() -> None:
    venv = Path(sys.prefix) / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    rules = new.rule_set()
    for label, root, skip in (("stdlib", STDLIB, SKIP), ("venv packages", venv, ())):
        files = [p for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".py", ".md", ".rst", ".txt",
                                                                                      ".json", ".toml", ".cfg")]
        size, changed, hits = 0, 0, collections.Counter()
        examples: dict[str, list[str]] = collections.defaultdict(list)
        for path in files:
            relative = path.relative_to(root).as_posix()
            if relative.startswith(skip):
                continue
            text = path.read_text(encoding="utf-8", errors="replace")
            size += len(text)
            if new.redact_text(text) == text:
                continue
            changed += 1
            for rule in rules.candidates(text):
                for match in rule.pattern.finditer(text):
                    span = finding_span(rule, match, text)
                    if span:
                        hits[rule.id] += 1
                        examples[rule.id].append(f"{relative}: {text[span[0]:span[1]][:40]!r}")
        print(f"{label}: {size / 1e6:.1f} MB in {len(files)} files; {changed} changed")
        for rule_id, count in hits.most_common():
            print(f"  {count:4} {rule_id}: {'; '.join(examples[rule_id][:3])}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--old-commit", default="cff79b5")
    parser.add_argument("--precision", action="store_true")
    args = parser.parse_args()
    speed(load_old(args.old_commit), args.repeat)
    if args.precision:
        precision()


if __name__ == "__main__":
    main()
