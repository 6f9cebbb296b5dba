"""The hand-built dataset of dataset.py, for any rollup test that asks for it."""

from __future__ import annotations

import pytest

from tests.rollups.dataset import build_dataset


@pytest.fixture
def dataset(project):
    build_dataset(project)
    return project
