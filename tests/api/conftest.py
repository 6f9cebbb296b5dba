from __future__ import annotations

import gzip
import json

import pytest
from rest_framework.test import APIClient

from tests.factories import make_key


class KeyClient(APIClient):
    """An API client that sends one project's key and JSON bodies."""

    def __init__(self, secret: str | None, **kwargs):
        super().__init__(**kwargs)
        if secret:
            self.credentials(HTTP_AUTHORIZATION=f"Bearer {secret}")

    def post_json(self, path: str, body, *, gzipped: bool = False, **extra):
        data = json.dumps(body).encode()
        if gzipped:
            data = gzip.compress(data)
            extra["HTTP_CONTENT_ENCODING"] = "gzip"
        return self.generic("POST", path, data, content_type="application/json", **extra)


@pytest.fixture
def ingest_key(project):
    return make_key(project, scopes=["ingest"])


@pytest.fixture
def api(ingest_key):
    return KeyClient(ingest_key.secret)


@pytest.fixture
def api_for():
    return KeyClient
