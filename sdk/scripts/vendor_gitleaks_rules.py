"""Vendor gitleaks' default rule set as JSON for toolscope_agent.engine.redaction.

Usage: python sdk/scripts/vendor_gitleaks_rules.py <gitleaks checkout> <commit>

The TOML (config/gitleaks.toml, MIT) is converted field for field, nothing dropped or edited:
the engine decides which rules it can use (rules tied to a file path are skipped, as there is
no path in telemetry). JSON rather than TOML because the SDK supports Python 3.10, which has no
tomllib. Run it again to pick up newer rules, then run tests/engine/test_redaction.py.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tomllib
from pathlib import Path

TARGET = Path(__file__).resolve().parent.parent / "toolscope_agent" / "engine" / "data"


def main(checkout: str, commit: str) -> None:
    def show(path: str) -> str:
        command = ["git", "-C", checkout, "show", f"{commit}:{path}"]  # a maintainer's own checkout
        return subprocess.run(command, check=True, capture_output=True, text=True).stdout  # noqa: S603

    config = tomllib.loads(show("config/gitleaks.toml"))
    document = {
        "source": "https://github.com/gitleaks/gitleaks/blob/" + commit + "/config/gitleaks.toml",
        "commit": commit,
        "license": "MIT, Copyright (c) 2019 Zachary Rice; full text in gitleaks.LICENSE",
        **config,
    }
    (TARGET / "gitleaks.json").write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n")
    (TARGET / "gitleaks.LICENSE").write_text(show("LICENSE"))


if __name__ == "__main__":
    main(*sys.argv[1:3])
