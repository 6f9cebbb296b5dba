"""A second, independent connection to the test database: another worker, as PostgreSQL sees it."""

from __future__ import annotations

import psycopg
from django.db import connection


def other_connection(**kwargs) -> psycopg.Connection:
    params = connection.get_connection_params()
    dsn = psycopg.conninfo.make_conninfo(**{k: v for k, v in params.items()
                                           if k in ("dbname", "user", "host", "port", "password")})
    return psycopg.connect(dsn, **kwargs)
