"""The gateway's stdin and stdout on the event loop (gateway/stdio.py): lines of any length in
order, and nothing but the wire on stdout while it serves."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import anyio, os, sys
    from toolscope_agent.gateway.stdio import event_loop_stdio

    async def main():
        async with event_loop_stdio() as streams:
            assert streams is not None, "pipes are served on the event loop"
            stdin, stdout = streams
            print("stray output of a library", flush=True)  # must not reach the wire
            os.write(1, b"stray bytes on fd 1\\n")
            async for line in stdin:
                await stdout.write(str(len(line)) + ":" + line[:20].rstrip("\\n") + "\\n")
                await stdout.flush()
        print("after: stdout is restored", flush=True)

    anyio.run(main)
""")


def test_lines_of_any_length_pass_in_order_and_stray_output_goes_to_stderr():
    big = json.dumps({"text": "x" * 3_000_000})  # a whole file as one JSON-RPC line
    lines = ['{"id": 1}', big, '{"id": "é"}']
    done = subprocess.run([sys.executable, "-c", SCRIPT], input="\n".join(lines) + "\n", capture_output=True,
                          text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == [
        f"{len(lines[0]) + 1}:{lines[0]}", f"{len(big) + 1}:{big[:20]}", f"{len(lines[2]) + 1}:{lines[2]}",
        "after: stdout is restored"]
    assert "stray output of a library" in done.stderr and "stray bytes on fd 1" in done.stderr


def test_a_file_as_stdin_keeps_the_sdk_streams(tmp_path):
    source = tmp_path / "in.jsonl"
    source.write_text("{}\n")
    script = ("import anyio\nfrom toolscope_agent.gateway.stdio import event_loop_stdio\n"
              "async def main():\n    async with event_loop_stdio() as streams:\n        print(streams)\n"
              "anyio.run(main)\n")
    with source.open() as stdin:
        done = subprocess.run([sys.executable, "-c", script], stdin=stdin, capture_output=True, text=True,
                              timeout=60, check=True)
    assert done.stdout == "None\n"
