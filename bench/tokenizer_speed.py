"""Tokenizer throughput: MB/s of toolscope.tokenizer.count_tokens and count_many on tool outputs.

A corpus of realistic tool outputs (default 20 MB of UTF-8, a third each):

- code:  real Python source (this interpreter's standard library), as a read_file tool returns
         it: whole files or slices of up to 40 KB, half of them with line numbers;
- shell: command logs (pytest, pip, compiler errors, tracebacks, git log, ls -l, docker build),
         generated from a fixed seed;
- json:  API responses (issue lists, search hits, resource descriptions), indented and compact,
         generated from a fixed seed.

For each encoding, single process: `count_tokens` on every output one by one, and `count_many`
on batches of outputs. Both count with bpe-openai's public `Encoding.encode_ordinary` (tiktoken
counts what it refuses). Best of --repeat runs. MB = 10**6 bytes of UTF-8. Also: the first use of
each encoding (both loaded), and each way of counting alone on all outputs, in the same run,
interleaved (each repeat runs every way once; best of --repeat), with its total tokens and how
many outputs it counts differently from tiktoken:

- bpe-openai `_bindings`: the private Rust binding's `count` (what toolscope used before issue 17);
- bpe-openai public: `len(bpe_openai.get_encoding(name).encode_ordinary(text))`;
- tiktoken public: `len(encoding_for(name).encode_ordinary(text))`, the `tiktoken.Encoding`
  toolscope builds from bpe-openai's vocabulary file (the reference);
- toolscope `count_tokens`.

They are timed output by output, interleaved (see `compare_paths`), so that the comparison holds on
a machine that something else is loading.

    .venv/bin/python bench/tokenizer_speed.py [--mb 20] [--repeat 3] [--batch 100]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import sysconfig
import time
from collections.abc import Callable, Iterator
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from toolscope import tokenizer

MAX_OUTPUT = 40_000


# ---------------------------------------------------------------------------------------------
# Corpus
# ---------------------------------------------------------------------------------------------


def code_outputs(budget: int, rng: random.Random) -> Iterator[str]:
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.rglob("*.py") if "test" not in p.parts and "site-packages" not in p.parts)
    rng.shuffle(files)
    size = 0
    for path in files:
        try:
            lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
        except (UnicodeDecodeError, OSError):
            continue
        numbered = rng.random() < 0.5
        start = 0
        while start < len(lines) and size < budget:
            chunk, length = [], 0
            while start < len(lines) and length < MAX_OUTPUT * rng.uniform(0.05, 1.0):
                line = f"{start + 1:6}\t{lines[start]}" if numbered else lines[start]
                chunk.append(line)
                length += len(line)
                start += 1
            text = "".join(chunk)
            size += len(text.encode())
            yield text
        if size >= budget:
            return


def _path(rng: random.Random) -> str:
    parts = ["src", "app", "api", "core", "models", "views", "utils", "services", "tests", "workers"]
    name = rng.choice(["models", "views", "serializers", "tasks", "client", "schema", "handlers", "config"])
    return "/".join(rng.sample(parts, rng.randint(1, 3))) + f"/{name}.py"


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def shell_output(rng: random.Random) -> str:
    kind = rng.choice(["pytest", "pip", "compile", "traceback", "gitlog", "ls", "docker"])
    out: list[str] = []
    target = rng.randint(500, MAX_OUTPUT)
    while sum(map(len, out)) < target:
        if kind == "pytest":
            test = f"{_path(rng).replace('src/', 'tests/')}::test_{rng.choice(['list', 'create', 'gzip', 'auth'])}"
            status = rng.choices(["PASSED", "FAILED", "SKIPPED", "ERROR"], [90, 6, 3, 1])[0]
            out.append(f"{test}_{rng.randint(1, 999)} {status} [{rng.randint(0, 100):3d}%]\n")
            if status == "FAILED":
                out.append(f"E       AssertionError: assert {rng.randint(100, 599)} == 202\n"
                           f"E        +  where {rng.randint(100, 599)} = <Response [400]>.status_code\n")
        elif kind == "pip":
            pkg = rng.choice(["django", "celery", "redis", "httpx", "pydantic", "numpy", "orjson", "lz4"])
            ver = f"{rng.randint(0, 9)}.{rng.randint(0, 30)}.{rng.randint(0, 9)}"
            out.append(f"Collecting {pkg}=={ver}\n  Downloading {pkg}-{ver}-py3-none-any.whl "
                       f"({rng.randint(10, 9000)} kB)\n     {'━' * 40} {rng.uniform(0.1, 9):.1f}/9.0 MB "
                       f"{rng.uniform(1, 90):.1f} MB/s eta 0:00:00\n")
        elif kind == "compile":
            line, col = rng.randint(1, 900), rng.randint(1, 80)
            out.append(f"{_path(rng).replace('.py', '.c')}:{line}:{col}: warning: unused variable 'tmp_{line}' "
                       f"[-Wunused-variable]\n  {line} |     int tmp_{line} = compute(buf, len);\n"
                       f"      |         ^~~~~~~\n")
        elif kind == "traceback":
            out.append("Traceback (most recent call last):\n")
            for _ in range(rng.randint(3, 12)):
                out.append(f'  File "/srv/app/{_path(rng)}", line {rng.randint(1, 900)}, in '
                           f"{rng.choice(['handle', 'dispatch', 'get', 'save', '_run'])}\n"
                           f"    return self.{rng.choice(['process', 'render', 'commit'])}(request, **kwargs)\n")
            out.append(f"KeyError: '{rng.choice(['user_id', 'session', 'schema_hash'])}'\n")
        elif kind == "gitlog":
            out.append(f"commit {_sha(rng)}\nAuthor: Dev {rng.randint(1, 40)} <dev{rng.randint(1, 40)}@example.com>\n"
                       f"Date:   Mon Mar {rng.randint(1, 28)} {rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}:00 "
                       f"2026 +0100\n\n    {rng.choice(['Fix', 'Add', 'Refactor', 'Speed up'])} "
                       f"{rng.choice(['ingest', 'rollups', 'policy publish', 'the exporter'])} "
                       f"(#{rng.randint(100, 999)})\n\n")
        elif kind == "ls":
            out.append(f"-rw-r--r--  1 dev  dev  {rng.randint(0, 10**6):>8} Mar {rng.randint(1, 28):2d} "
                       f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d} {_path(rng).rsplit('/', 1)[-1]}\n")
        else:
            out.append(f"#{rng.randint(1, 30)} [{rng.choice(['build', 'runtime'])} {rng.randint(1, 9)}/9] "
                       f"RUN pip install -r requirements.txt\n#{rng.randint(1, 30)} "
                       f"{rng.uniform(0, 90):.3f} sha256:{_sha(rng)}{_sha(rng)[:24]} done\n")
    return "".join(out)


def json_output(rng: random.Random) -> str:
    kind = rng.choice(["issues", "search", "resource"])
    target = rng.randint(500, MAX_OUTPUT)
    items: list[dict[str, object]] = []
    while len(json.dumps(items)) < target * 0.6:
        n = len(items)
        if kind == "issues":
            items.append({"id": rng.randint(10**6, 10**7), "number": n + 1, "state": rng.choice(["open", "closed"]),
                          "title": rng.choice(["Crash when", "Slow", "Wrong count for", "Add option to"]) + " "
                          + rng.choice(["ingest batches", "the dashboard", "tool_search", "compaction"]),
                          "user": {"login": f"dev{rng.randint(1, 99)}", "id": rng.randint(1, 10**6)},
                          "labels": [{"name": rng.choice(["bug", "perf", "ui", "api"]),
                                      "color": f"{rng.getrandbits(24):06x}"}],
                          "created_at": f"2026-0{rng.randint(1, 9)}-{rng.randint(10, 28)}T{rng.randint(10, 23)}:00:00Z",
                          "body": "Steps: run `pytest -q` — résultat attendu ≠ obtenu. " * rng.randint(0, 4)})
        elif kind == "search":
            items.append({"path": _path(rng), "line": rng.randint(1, 900), "score": round(rng.random(), 4),
                          "preview": f"    def {rng.choice(['get', 'post', 'save'])}(self, request, *args):"})
        else:
            items.append({"apiVersion": "apps/v1", "kind": "Deployment",
                          "metadata": {"name": f"worker-{n}", "uid": f"{rng.getrandbits(128):032x}",
                                       "labels": {"app": "toolscope", "tier": rng.choice(["web", "worker"])}},
                          "spec": {"replicas": rng.randint(1, 8), "template": {"spec": {"containers": [
                              {"name": "app", "image": f"registry.example.com/toolscope:{_sha(rng)[:12]}",
                               "resources": {"limits": {"cpu": "500m", "memory": "512Mi"}}}]}}}})
    document = {"total_count": len(items), "incomplete_results": False, "items": items}
    return json.dumps(document, indent=2 if rng.random() < 0.5 else None, ensure_ascii=rng.random() < 0.3)


def generated(budget: int, make: Callable[[random.Random], str], rng: random.Random) -> Iterator[str]:
    size = 0
    while size < budget:
        text = make(rng)
        size += len(text.encode())
        yield text


def corpus(total_bytes: int) -> dict[str, list[str]]:
    third = total_bytes // 3
    return {
        "code": list(code_outputs(third, random.Random(1))),
        "shell": list(generated(third, shell_output, random.Random(2))),
        "json": list(generated(third, json_output, random.Random(3))),
    }


# ---------------------------------------------------------------------------------------------
# Measurements
# ---------------------------------------------------------------------------------------------


def best_of(run: Callable[[], list[int]], repeat: int) -> tuple[float, float, list[int]]:
    """The shortest wall time and shortest CPU time (all threads) of `repeat` runs, and what a run returned."""
    wall, cpu, result = float("inf"), float("inf"), []
    for _ in range(repeat):
        started, cpu_started = time.perf_counter(), time.process_time()
        result = run()
        wall = min(wall, time.perf_counter() - started)
        cpu = min(cpu, time.process_time() - cpu_started)
    return wall, cpu, result


def compare_paths(everything: list[str], repeat: int) -> None:
    """Each way of counting on every output, interleaved output by output: each repeat times every way
    on an output before the next output (in a random order each time, since a way timed right after
    tiktoken finds the CPU caches colder), and a way's time is the sum over outputs of
    its best time for each (so a burst of load on a shared machine slows every way alike, and the best
    of `repeat` drops it). Prints MB/s, total tokens, and outputs counted differently from tiktoken."""
    try:
        from bpe_openai import _bindings  # the private binding, measured for comparison only
    except ImportError:
        _bindings = None
    megabytes = sum(len(t.encode()) for t in everything) / 1e6
    print(f"\nEach way of counting alone, all {len(everything)} outputs ({megabytes:.1f} MB), interleaved output "
          f"by output, best of {repeat} per output; differing: outputs counted differently from tiktoken")
    header = f"{'encoding':<12} {'way':<42} {'MB/s':>6} {'vs _bindings':>12} {'tokens':>9} {'differing':>9}"
    print(header)
    print("-" * len(header))
    clock = time.perf_counter
    for name in tokenizer.ENCODINGS:
        reference = tokenizer.encoding_for(name).encode_ordinary
        public = tokenizer.fast_encoding_for(name).encode_ordinary
        ways: dict[str, Callable[[str], int]] = {}
        if _bindings is not None:
            ways["bpe-openai _bindings count (private)"] = _bindings.tokenizer_for_encoding(name).count
        ways["bpe-openai get_encoding().encode_ordinary"] = lambda t, encode=public: len(encode(t))
        ways["tiktoken Encoding (bundled ranks)"] = lambda t, encode=reference: len(encode(t))
        ways["toolscope count_tokens"] = tokenizer.counter(name)
        best = {way: [float("inf")] * len(everything) for way in ways}
        counts = {way: [0] * len(everything) for way in ways}
        order, shuffler = list(ways.items()), random.Random(4)
        for _ in range(repeat):
            for i, text in enumerate(everything):
                shuffler.shuffle(order)
                for way, count in order:
                    started = clock()
                    counts[way][i] = count(text)
                    elapsed = clock() - started
                    if elapsed < best[way][i]:
                        best[way][i] = elapsed
        expected = counts["tiktoken Encoding (bundled ranks)"]
        seconds = {way: sum(times) for way, times in best.items()}
        private = seconds.get("bpe-openai _bindings count (private)")
        for way in ways:
            differing = sum(a != b for a, b in zip(counts[way], expected, strict=True))
            relative = f"{private / seconds[way]:12.0%}" if private else f"{'-':>12}"
            print(f"{name:<12} {way:<42} {megabytes / seconds[way]:6.1f} {relative} "
                  f"{sum(counts[way]):9d} {differing:9d}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mb", type=float, default=20.0, help="corpus size in MB (10**6 bytes)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--batch", type=int, default=100, help="outputs per count_many call")
    args = parser.parse_args()

    print(f"python {sys.version.split()[0]}, tiktoken {tokenizer.tiktoken.__version__}, "
          f"bpe-openai {tokenizer.bpe_openai.__version__}, {os.cpu_count()} CPUs; counter: bpe-openai's public "
          f"Encoding.encode_ordinary, tiktoken for the texts it refuses")
    for name in tokenizer.ENCODINGS:
        started = time.perf_counter()
        tokenizer.counter(name)
        print(f"first use of {name} (tiktoken and bpe-openai encodings): {time.perf_counter() - started:.2f} s")

    started = time.perf_counter()
    kinds = corpus(int(args.mb * 1e6))
    everything = [text for texts in kinds.values() for text in texts]
    total_mb = sum(len(t.encode()) for t in everything) / 1e6
    print(f"corpus: {total_mb:.1f} MB, {len(everything)} outputs, built in {time.perf_counter() - started:.1f} s\n")

    print("count_tokens and count_many: MB/s of wall time; cpu: MB per CPU-second of count_tokens (what a")
    print("core that is not shared with other processes would do)\n")
    header = (f"{'encoding':<12} {'kind':<6} {'MB':>5} {'outputs':>7} {'tokens':>9} {'B/token':>7} "
              f"{'count_tokens':>13} {'(cpu)':>6} {'count_many':>11}")
    print(header)
    print("-" * len(header))
    for name in tokenizer.ENCODINGS:
        totals = [0.0, 0.0, 0.0, 0]
        for kind, texts in kinds.items():
            megabytes = sum(len(t.encode()) for t in texts) / 1e6
            batches = [texts[i:i + args.batch] for i in range(0, len(texts), args.batch)]
            one_by_one, one_by_one_cpu, single = best_of(
                lambda texts=texts, name=name: [tokenizer.count_tokens(t, name) for t in texts], args.repeat
            )
            batched, _, many = best_of(
                lambda batches=batches, name=name: [n for b in batches for n in tokenizer.count_many(b, name)],
                args.repeat,
            )
            assert many == single, "count_many disagrees with count_tokens"
            totals[0] += one_by_one
            totals[1] += one_by_one_cpu
            totals[2] += batched
            totals[3] += sum(single)
            print(f"{name:<12} {kind:<6} {megabytes:5.1f} {len(texts):7d} {sum(single):9d} "
                  f"{megabytes * 1e6 / sum(single):7.2f} {megabytes / one_by_one:8.1f} MB/s "
                  f"{megabytes / one_by_one_cpu:6.1f} {megabytes / batched:6.1f} MB/s")
        print(f"{name:<12} {'all':<6} {total_mb:5.1f} {len(everything):7d} {totals[3]:9.0f} "
              f"{total_mb * 1e6 / totals[3]:7.2f} {total_mb / totals[0]:8.1f} MB/s {total_mb / totals[1]:6.1f} "
              f"{total_mb / totals[2]:6.1f} MB/s")

    compare_paths(everything, args.repeat)


if __name__ == "__main__":
    main()
