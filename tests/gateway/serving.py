"""toolscope-mcp serving Streamable HTTP for a test: started on a free port, its URL while it runs."""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

BIN = Path(__file__).resolve().parents[2] / ".venv" / "bin"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def http_gateway(config: Path, log: Path) -> Iterator[str]:
    """The gateway of `config` over HTTP (its output in `log`); yields its MCP endpoint's URL."""
    port = free_port()
    with log.open("w") as out:
        process = subprocess.Popen([str(BIN / "toolscope-mcp"), "--config", str(config), "--transport", "http",
                                    "--port", str(port), "--log-level", "INFO"], stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    assert process.poll() is None and time.monotonic() < deadline, log.read_text()
                    time.sleep(0.1)
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            process.terminate()
            process.wait(timeout=10)
