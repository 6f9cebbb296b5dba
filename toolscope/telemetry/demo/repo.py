"""The fake repository the demo agent works on: acme/shopfront, a Django shop backend.

File texts are generated from the path (and an edit count) with a stable hash, never Python's
salted hash(), so every run and every process sees the same repository. Reads of an unchanged
file therefore return byte-identical text, which is what duplicate detection looks for.
"""

from __future__ import annotations

import difflib
import fnmatch
import random
import re
import zlib
from functools import lru_cache

REPO = "acme/shopfront"
ROOT = "/workspace/shopfront"

# path -> (entity, one-line purpose)
SOURCE_FILES: dict[str, tuple[str, str]] = {
    "src/shopfront/orders/models.py": ("order", "Orders and their line items."),
    "src/shopfront/orders/services.py": ("order", "Placing, cancelling and refunding orders."),
    "src/shopfront/orders/views.py": ("order", "REST endpoints for orders."),
    "src/shopfront/orders/serializers.py": ("order", "Serializers of the orders API."),
    "src/shopfront/billing/invoices.py": ("invoice", "Invoice generation and numbering."),
    "src/shopfront/billing/tax.py": ("invoice", "VAT rules per country, rounding per line."),
    "src/shopfront/billing/stripe_client.py": ("payment", "Thin wrapper around the Stripe API."),
    "src/shopfront/catalog/models.py": ("product", "Products, variants and prices."),
    "src/shopfront/catalog/views.py": ("product", "Product list and detail endpoints."),
    "src/shopfront/catalog/search.py": ("product", "Full-text product search on PostgreSQL."),
    "src/shopfront/catalog/pagination.py": ("product", "Cursor pagination for large lists."),
    "src/shopfront/accounts/auth.py": ("customer", "Login, tokens and password reset."),
    "src/shopfront/accounts/permissions.py": ("customer", "Object permissions for customers and staff."),
    "src/shopfront/shipping/rates.py": ("shipment", "Carrier rate lookup and caching."),
    "src/shopfront/tasks.py": ("order", "Celery tasks: emails, exports, retries."),
    "tests/orders/test_services.py": ("order", "Tests of order services."),
    "tests/orders/test_views.py": ("order", "Tests of the orders API."),
    "tests/billing/test_invoices.py": ("invoice", "Tests of invoice generation."),
    "tests/billing/test_tax.py": ("invoice", "Tests of VAT rounding."),
    "tests/catalog/test_search.py": ("product", "Tests of product search."),
    "tests/catalog/test_pagination.py": ("product", "Tests of cursor pagination."),
    "tests/accounts/test_auth.py": ("customer", "Tests of login and tokens."),
    "tests/shipping/test_rates.py": ("shipment", "Tests of rate lookup."),
}
OTHER_FILES: dict[str, str] = {
    "pyproject.toml": '[project]\nname = "shopfront"\nversion = "2.14.0"\nrequires-python = ">=3.12"\n'
    'dependencies = [\n    "django>=5.1,<5.2",\n    "djangorestframework>=3.15",\n    "celery[redis]>=5.4",\n'
    '    "stripe>=10.0",\n    "psycopg[binary]>=3.2",\n]\n\n[tool.pytest.ini_options]\n'
    'DJANGO_SETTINGS_MODULE = "shopfront.settings.test"\naddopts = "-ra --strict-markers"\n\n'
    '[tool.ruff]\nline-length = 100\n',
    "README.md": "# shopfront\n\nBackend of the Acme shop: catalog, orders, billing, shipping.\n\n"
    "## Development\n\n```\nmake up        # postgres + redis\nmake test      # pytest\nmake lint\n```\n",
    "Makefile": "up:\n\tdocker compose up -d db redis\ntest:\n\tpytest -q\nlint:\n\truff check . && mypy src\n",
    "docker-compose.yml": "services:\n  db:\n    image: postgres:16\n    ports: [\"5432:5432\"]\n"
    "  redis:\n    image: redis:7\n  web:\n    build: .\n    depends_on: [db, redis]\n",
}
ALL_PATHS: tuple[str, ...] = tuple(sorted([*SOURCE_FILES, *OTHER_FILES]))

_FUNCTION = '''def {verb}_{entity}(*, {entity}_id: int, user: User) -> {Entity}:
    """{Verb} the {entity} on behalf of a customer or staff member."""
    {entity} = {Entity}.objects.select_related("customer").get(pk={entity}_id)
    if not user.has_perm("{app}.change_{entity}", {entity}):
        raise PermissionDenied("{verb} {entity} requires change permission")
    {entity}.{field} = {value}
    {entity}.updated_at = timezone.now()
    {entity}.save(update_fields=["{field}", "updated_at"])
    logger.info("{entity} %s: {verb}", {entity}.pk)
    return {entity}
'''
_TOTAL = '''def compute_{entity}_total(lines: list[LineItem], *, country: str) -> Decimal:
    """Sum of the lines with VAT, rounded per line as the tax office expects."""
    total = Decimal("0.00")
    for line in lines:
        rate = VAT_RATES.get(country, DEFAULT_VAT_RATE)
        gross = line.unit_price * line.quantity * (1 + rate)
        total += gross.quantize(CENT, rounding=ROUND_HALF_UP)
    return total
'''
_TEST = '''@pytest.mark.django_db
def test_{verb}_{entity}_{case}({entity}_factory, staff_user):
    {entity} = {entity}_factory(status="{status}")
    result = {verb}_{entity}({entity}_id={entity}.pk, user=staff_user)
    assert result.{field} == {value}
    assert result.updated_at is not None
'''
PAST = {"cancel": "cancelled", "refund": "refunded", "archive": "archived", "approve": "approved",
         "ship": "shipped", "reopen": "reopened", "lock": "locked", "publish": "published"}
_VERBS = tuple(PAST)
_CASES = ("as_staff", "twice_is_harmless", "sets_timestamp", "for_other_country", "with_discount")


def stable_seed(*parts: object) -> int:
    return zlib.crc32("|".join(map(str, parts)).encode())


def symbols(path: str) -> list[str]:
    """The function names defined in a file, in order; tasks and greps refer to them."""
    return re.findall(r"^def (\w+)", file_text(path), flags=re.MULTILINE)


@lru_cache(maxsize=512)
def file_text(path: str, version: int = 0) -> str:
    """The file at `path` after `version` edits by the agent."""
    if path in OTHER_FILES:
        return OTHER_FILES[path]
    entity, purpose = SOURCE_FILES[path]
    rng = random.Random(stable_seed(path))
    is_test = path.startswith("tests/")
    blocks = [_header(path, purpose, is_test)]
    if "billing" in path and not is_test:
        blocks.append(_TOTAL.format(entity=entity))
    for verb in rng.sample(_VERBS, rng.randint(2, 5)):
        values = {"verb": verb, "Verb": verb.title(), "entity": entity, "Entity": entity.title(),
                  "app": path.split("/")[-2], "field": "status", "value": f'"{PAST[verb]}"'}
        if is_test:
            for case in rng.sample(_CASES, 2):
                blocks.append(_TEST.format(case=case, status=rng.choice(("new", "paid", "open")), **values))
        else:
            blocks.append(_FUNCTION.format(**values))
    text = "\n\n".join(blocks)
    for n in range(version):
        text = edit(text, n)[0]
    return text


# The legacy module long sessions port: too big to read at once, so agents page through it.
LEGACY_PATH = "src/shopfront/legacy/pricing.py"
LEGACY_RULES = 1100
_RULE = '''def price_rule_{n:04d}_{segment}_{family}(line: LineItem, *, customer: Customer, today: date) -> Decimal:
    """{family_title} for {segment} customers, rule {n} (ticket SHOP-{ticket})."""
    if customer.segment != "{segment}" or line.product.family != "{family}":
        return line.unit_price
    if not ({start} <= today.toordinal() < {end}):
        return line.unit_price
    price = line.unit_price * (1 - Decimal("{percent}") / 100)
    return max(price, line.unit_price * Decimal("0.{floor}")).quantize(CENT, rounding=ROUND_HALF_UP)
'''
_SEGMENTS = ("retail", "wholesale", "staff", "partner", "education", "nonprofit")
_FAMILIES = ("apparel", "footwear", "outdoor", "kitchen", "garden", "toys", "books", "audio")


@lru_cache(maxsize=1)
def legacy_text() -> str:
    """The legacy pricing module: about eleven thousand lines of near-identical rules."""
    rng = random.Random(stable_seed(LEGACY_PATH))
    blocks = [_header(LEGACY_PATH, "Legacy pricing rules, generated in 2019. Do not edit by hand.", False)]
    for n in range(1, LEGACY_RULES + 1):
        family = rng.choice(_FAMILIES)
        start = 737_000 + rng.randrange(1_500)
        blocks.append(_RULE.format(
            n=n, segment=rng.choice(_SEGMENTS), family=family, family_title=family.title() + " discount",
            ticket=rng.randint(100, 1399), start=start, end=start + rng.randrange(30, 400),
            percent=rng.choice(("5", "7.5", "10", "12.5", "15", "20", "25")), floor=rng.randint(50, 90),
        ))
    return "\n\n".join(blocks)


@lru_cache(maxsize=1)
def _legacy_split() -> tuple[str, ...]:
    return tuple(legacy_text().splitlines())


def legacy_lines() -> int:
    return len(_legacy_split())


def legacy_page(offset: int, limit: int) -> str:
    """A read_file result of the legacy module from line `offset`: numbered() without
    splitting eleven thousand lines for every page."""
    lines = _legacy_split()[offset - 1 : offset - 1 + limit]
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=offset))


_EDIT_ANCHOR = re.compile(r"^    (return|assert) ")
_EDIT_NOTES = ("keep the row lock until commit", "round per line, not per invoice",
               "guard against a double submit", "the carrier API answers 429 under load")


def edit(text: str, n: int) -> tuple[str, str, str]:
    """(new text, old_string, new_string) of the agent's n-th edit of a source file.

    An edit adds a line above the first return or assert, the way a fix usually lands. file_text
    replays the same edits, so a read after an edit shows exactly what the edit wrote.
    """
    lines = text.splitlines()
    at = next((i for i, line in enumerate(lines) if _EDIT_ANCHOR.match(line)), len(lines) - 1)
    note = f"    # SHOP-{1400 + n}: {_EDIT_NOTES[n % len(_EDIT_NOTES)]}"
    old = "\n".join(lines[at - 1 : at + 1])
    new = "\n".join([lines[at - 1], note, lines[at]])
    return "\n".join([*lines[:at], note, *lines[at:]]) + "\n", old, new


def _header(path: str, purpose: str, is_test: bool) -> str:
    module = path.removeprefix("src/").removesuffix(".py").replace("/", ".")
    if is_test:
        target = module.replace("tests.", "shopfront.").replace(".test_", ".")
        return f'"""{purpose}"""\n\nimport pytest\n\nfrom {target} import *  # noqa: F403\n'
    return (
        f'"""{purpose}"""\n\nfrom __future__ import annotations\n\nimport logging\n'
        "from decimal import ROUND_HALF_UP, Decimal\n\nfrom django.core.exceptions import PermissionDenied\n"
        "from django.utils import timezone\n\n"
        f"logger = logging.getLogger({module!r})\nCENT = Decimal(\"0.01\")\n"
    )


def numbered(text: str, offset: int = 1, limit: int = 2000) -> str:
    """A read_file result: cat -n style, as coding agents show files to the model."""
    lines = text.splitlines()[offset - 1 : offset - 1 + limit]
    return "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(lines, start=offset))


@lru_cache(maxsize=256)
def grep(pattern: str, *, glob: str = "*", files_only: bool = False) -> str:
    """Matches in the files as committed; pure, so cached: sessions grep for the same few things."""
    regex = re.compile(pattern)
    hits: list[str] = []
    for path in ALL_PATHS:
        if not fnmatch.fnmatch(path, glob) and not fnmatch.fnmatch(path.rsplit("/", 1)[-1], glob):
            continue
        matches = [(n, line) for n, line in enumerate(file_text(path).splitlines(), 1) if regex.search(line)]
        if matches and files_only:
            hits.append(path)
        hits.extend(f"{path}:{n}:{line}" for n, line in matches if not files_only)
    return "\n".join(hits) if hits else "No matches found"


def glob(pattern: str) -> str:
    matches = [p for p in ALL_PATHS if fnmatch.fnmatch(p, pattern)]
    return "\n".join(matches) if matches else "No files found"


def list_dir(path: str) -> str:
    prefix = "" if path in ("", ".") else path.rstrip("/") + "/"
    entries = sorted({p[len(prefix) :].split("/")[0] + ("/" if "/" in p[len(prefix) :] else "")
                      for p in ALL_PATHS if p.startswith(prefix)})
    if not entries:
        return f"Error: {path}: no such directory"
    return "\n".join(f"- {entry}" for entry in entries)


def diff(path: str, version: int) -> str:
    """The unified diff of an edited file against HEAD, as git prints it."""
    before, after = file_text(path).splitlines(), file_text(path, version).splitlines()
    body = difflib.unified_diff(before, after, f"a/{path}", f"b/{path}", lineterm="", n=3)
    return f"diff --git a/{path} b/{path}\nindex 3f1c2a9..8b7e41d 100644\n" + "\n".join(body)
