"""Arguments and outputs of the remote tools: web search and fetch, and the development database.

Outputs mimic what the real services print: search result lists, markdown pages, psql tables.
"""

from __future__ import annotations

import random
from datetime import timedelta

from toolscope.telemetry.demo import repo
from toolscope.telemetry.demo.calls import Builder, CallResult
from toolscope.telemetry.demo.tasks import SessionState

_SEARCH_RESULTS = (
    ("Django 5.1 release notes", "https://docs.djangoproject.com/en/5.1/releases/5.1/",
     "Features deprecated in 5.1 ... The URLField.assume_scheme default changes to 'https' in Django 6.0."),
    ("Deprecation timeline | Django documentation", "https://docs.djangoproject.com/en/dev/internals/deprecation/",
     "These features will be removed in Django 6.0: ... forms.URLField assume_scheme default."),
    ("Celery 5.4 changelog", "https://docs.celeryq.dev/en/stable/changelog.html",
     "5.4.0: Python 3.8 support dropped; broker_connection_retry_on_startup; task_reject_on_worker_lost..."),
    ("stripe-python migration guide for v11", "https://github.com/stripe/stripe-python/wiki/Migration-guide-for-v11",
     "StripeClient is now the recommended way to call the API; global configuration is deprecated."),
    ("Idempotent requests | Stripe API reference", "https://docs.stripe.com/api/idempotent_requests",
     ("Stripe supports idempotency for safely retrying requests without accidentally performing the same "
     "operation twice.")),
    ("Decimal rounding of VAT per line or per invoice? - Stack Overflow",
     "https://stackoverflow.com/questions/4437925/vat-rounding",
     "EU rules allow either, but you must be consistent; Austria expects rounding per line item..."),
    ("QuerySet API: select_related and prefetch_related", "https://docs.djangoproject.com/en/5.1/ref/models/querysets/",
     "prefetch_related does a separate lookup for each relationship and does the joining in Python."),
    ("Use the Index, Luke: ORDER BY with LIMIT", "https://use-the-index-luke.com/sql/partial-results/top-n-queries",
     "An index on the ORDER BY columns lets the database stop after the first N rows."),
    ("pytest-django: database access and transactions", "https://pytest-django.readthedocs.io/en/latest/database.html",
     "Tests that need transactions must use transaction=True; otherwise on_commit callbacks never run."),
    ("Docker build fails: psycopg-binary has no wheel for this platform", "https://github.com/psycopg/psycopg/issues/344",
     "On slim images without a matching wheel pip builds from source and needs libpq-dev and gcc."),
)
_PAGES = {
    "https://docs.djangoproject.com/en/5.1/releases/5.1/": "Django 5.1 release notes",
    "https://docs.celeryq.dev/en/stable/changelog.html": "Celery change history",
    "https://docs.stripe.com/api/idempotent_requests": "Idempotent requests",
    "https://github.com/stripe/stripe-python/wiki/Migration-guide-for-v11": "Migration guide for v11",
}
_SENTENCES = (
    "This release drops support for versions that reached end of life.",
    ("The default value of the setting changes in the next major release; set it explicitly to keep the old "
    "behaviour and silence the warning."),
    "Client objects are now thread-safe and can be shared between requests.",
    "Retries use exponential backoff with jitter and respect the Retry-After header.",
    "Passing positional arguments to this function is deprecated; use keyword arguments instead.",
    "The previous behaviour can be restored with a compatibility flag until the feature is removed.",
    "Performance of the query planner improved for large IN clauses.",
)


def _iso(state: SessionState, days_ago: float) -> str:
    return (state.started_at - timedelta(days=days_ago)).strftime("%Y-%m-%dT%H:%M:%SZ")


def web_search(state: SessionState) -> CallResult:
    rng = state.rng
    query = rng.choice({
        "upgrade": ("django 5.1 RemovedInDjango60Warning assume_scheme", "celery 5.4 breaking changes",
                    "stripe-python v11 migration"),
        "build": ("docker build psycopg-binary failed to solve exit code 1", "mypy django-stubs name-defined"),
        "database": ("postgres index order by created_at desc limit", "django N+1 serializer prefetch_related"),
    }.get(state.task.kind, ("pytest-django on_commit not called", "python decimal vat rounding per line")))
    results = rng.sample(_SEARCH_RESULTS, rng.randint(5, 8))
    lines = [f'Web search results for query: "{query}"', ""]
    for n, (title, url, snippet) in enumerate(results, start=1):
        lines += [f"{n}. {title}", f"   {url}", f"   {snippet}", ""]
    return CallResult({"query": query}, "\n".join(lines), duration_ms=round(rng.uniform(600, 3500), 1))


def web_fetch(state: SessionState) -> CallResult:
    rng = state.rng
    url = rng.choice(sorted(_PAGES))
    arguments = {"url": url, "prompt": "What changed that affects our code?"}
    if rng.random() < 0.12:
        error = "Request timed out after 30000 ms"
        return CallResult(arguments, error, "error", error, round(rng.uniform(90000, 95000), 1), retries=2)
    page = random.Random(repo.stable_seed(url))
    sections = [f"## {heading}\n\n" + " ".join(page.choices(_SENTENCES, k=page.randint(4, 9)))
                for heading in ("What's new", "Backwards incompatible changes", "Deprecated features",
                                "Bug fixes", "Upgrading")]
    return CallResult(arguments, f"# {_PAGES[url]}\n\n" + "\n\n".join(sections),
                      duration_ms=round(rng.uniform(400, 4000), 1))


_QUERIES = (
    (("SELECT o.id, o.status, o.created_at, c.email FROM orders_order o JOIN accounts_customer c "
     "ON c.id = o.customer_id ORDER BY o.created_at DESC LIMIT 20"), ("id", "status", "created_at", "email")),
    (("SELECT customer_id, count(*) AS refunds FROM orders_order WHERE status = 'refunded' AND updated_at > "
     "now() - interval '30 days' GROUP BY customer_id HAVING count(*) > 3 ORDER BY refunds DESC"),
     ("customer_id", "refunds")),
    ("SELECT number, count(*) FROM billing_invoice GROUP BY number HAVING count(*) > 1", ("number", "count")),
    ("SELECT relname, seq_scan, idx_scan, n_live_tup FROM pg_stat_user_tables ORDER BY seq_scan DESC LIMIT 10",
     ("relname", "seq_scan", "idx_scan", "n_live_tup")),
)


def _cell(rng: random.Random, column: str, state: SessionState) -> str:
    if column == "status":
        return rng.choice(("paid", "shipped", "refunded", "new"))
    if column == "created_at":
        return _iso(state, rng.uniform(0, 30))
    if column == "email":
        return f"customer{rng.randint(10, 9999)}@example.com"
    if column == "relname":
        return rng.choice(("orders_order", "orders_lineitem", "billing_invoice", "catalog_product"))
    if column == "number":
        return f"INV-2025-{rng.randint(1, 9999):05d}"
    return str(rng.randint(1, 50000))


def sql_query(state: SessionState) -> CallResult:
    rng = state.rng
    query, columns = rng.choice(_QUERIES)
    if rng.random() < 0.1:
        bad = query.replace("c.email", "c.mail")
        error = 'ERROR:  column c.mail does not exist\nHINT:  Perhaps you meant to reference the column "c.email".'
        return CallResult({"query": bad}, error, "error", error.splitlines()[0], round(rng.uniform(2, 20), 1))
    rows = [[_cell(rng, column, state) for column in columns] for _ in range(rng.randint(2, 20))]
    lines = [" | ".join(columns), "-+-".join("-" * len(c) for c in columns)]
    lines += [" | ".join(row) for row in rows] + [f"({len(rows)} rows)"]
    return CallResult({"query": query, "max_rows": 100}, "\n".join(lines), duration_ms=round(rng.uniform(3, 900), 1))


_TABLES = {
    "orders_order": ("id bigint not null", "customer_id bigint not null", "status varchar(16) not null",
                     "total numeric(12,2) not null", "created_at timestamptz not null", "updated_at timestamptz"),
    "billing_invoice": ("id bigint not null", "order_id bigint not null", "number varchar(20) not null",
                        "issued_at timestamptz not null", "country char(2) not null", "total numeric(12,2)"),
    "catalog_product": ("id bigint not null", "sku varchar(32) not null", "name varchar(200) not null",
                        "price numeric(10,2) not null", "search_vector tsvector", "is_active boolean not null"),
}


def describe_table(state: SessionState) -> CallResult:
    table = state.rng.choice(sorted(_TABLES))
    columns = "\n".join(f"  {col}" for col in _TABLES[table])
    output = (f'Table "public.{table}"\nColumns:\n{columns}\nIndexes:\n  "{table}_pkey" PRIMARY KEY, btree (id)\n'
              f'  "{table}_created_idx" btree (created_at)' if "order" in table else
              f'Table "public.{table}"\nColumns:\n{columns}\nIndexes:\n  "{table}_pkey" PRIMARY KEY, btree (id)')
    return CallResult({"table": table}, output, duration_ms=round(state.rng.uniform(4, 40), 1))


def list_tables(state: SessionState) -> CallResult:
    counts = random.Random(repo.stable_seed("tables"))
    lines = ["Schema | Name | Rows (est.) | Size", "-------+------+-------------+-----"]
    lines += [f"public | {name} | {counts.randint(1000, 2_000_000)} | {counts.randint(1, 900)} MB"
              for name in ("accounts_customer", "billing_invoice", "catalog_product", "catalog_variant",
                           "orders_lineitem", "orders_order", "shipping_rate", "django_migrations")]
    return CallResult({"schema": "public"}, "\n".join(lines), duration_ms=round(state.rng.uniform(5, 60), 1))


def explain_query(state: SessionState) -> CallResult:
    rng = state.rng
    query = _QUERIES[0][0]
    plan = (f"Limit  (cost=48211.32..48211.37 rows=20 width=64) (actual time={rng.uniform(800, 2400):.3f} rows=20)\n"
            "  ->  Sort  (cost=48211.32..49461.32 rows=500000 width=64)\n"
            "        Sort Key: o.created_at DESC\n        Sort Method: top-N heapsort  Memory: 27kB\n"
            "        ->  Hash Join  (cost=3012.00..34906.00 rows=500000 width=64)\n"
            "              ->  Seq Scan on orders_order o  (cost=0.00..22346.00 rows=500000 width=40)\n"
            "              ->  Hash  (cost=1887.00..1887.00 rows=90000 width=32)\n"
            "                    ->  Seq Scan on accounts_customer c\nPlanning Time: 0.412 ms")
    return CallResult({"query": query, "analyze": True}, plan, duration_ms=round(rng.uniform(900, 2600), 1))


REMOTE_BUILDERS: dict[str, Builder] = {
    "web_search": web_search, "web_fetch": web_fetch, "sql_query": sql_query, "describe_table": describe_table,
    "list_tables": list_tables, "explain_query": explain_query,
}
