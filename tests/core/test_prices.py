"""Model prices (issue 26, item 1): genai-prices' bundled snapshot, offline, as of a moment, with a
project's own prices winning for their model from their date on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from decimal import Decimal

import pytest

from tests.factories import make_project
from toolscope.prices import library_version, model_price
from toolscope.telemetry.models import ModelPrice

AT = datetime(2026, 11, 1, tzinfo=UTC)


def test_anthropic_prices_each_component_and_its_long_context_tier():
    price = model_price(model="claude-sonnet-4-5", at=AT)
    assert (price.provider, price.model, price.source) == ("anthropic", "claude-sonnet-4-5",
                                                           f"genai-prices {library_version()}")
    # Anthropic's published prices for Sonnet 4.5, per million tokens.
    assert [price.of(name) for name in ("input", "output", "cache_read", "cache_write", "cache_write_1h")] == [
        Decimal("3"), Decimal("15"), Decimal("0.3"), Decimal("3.75"), Decimal("6")]
    # Above 200,000 input tokens a request is billed at the long-context prices.
    assert (price.of("input", 200_000), price.of("input", 200_001), price.of("cache_read", 250_000)) == (
        Decimal("3"), Decimal("6"), Decimal("0.6"))


def test_openai_bills_cached_input_and_no_cache_write():
    price = model_price(model="gpt-4o", provider="openai", at=AT)
    assert (price.of("input"), price.of("cache_read"), price.of("cache_write")) == (
        Decimal("2.5"), Decimal("1.25"), None)


def test_an_unknown_model_or_provider_has_no_price():
    assert model_price(model="no-such-model-anywhere", at=AT) is None
    assert model_price(model="gpt-4o", provider="no-such-provider", at=AT) is None


def test_the_bundled_snapshot_is_read_and_never_updated():
    from genai_prices import data_snapshot

    model_price(model="gpt-4o", at=AT)
    assert data_snapshot.get_snapshot().from_auto_update is False


@pytest.mark.django_db
def test_a_projects_own_price_wins_from_its_date_on():
    project = make_project("priced")
    common = {"project": project, "model": "claude-sonnet-4-5", "output_mtok": Decimal("10")}
    ModelPrice.objects.create(**common, input_mtok=Decimal("2"), valid_from=AT - timedelta(days=30),
                              note="contract 2026")
    ModelPrice.objects.create(**common, input_mtok=Decimal("1.5"), cache_read_mtok=Decimal("0.15"),
                              valid_from=AT + timedelta(days=30), note="contract 2027")
    rows = list(project.model_prices.all())
    price = model_price(model="claude-sonnet-4-5", at=AT, overrides=rows)
    assert (price.source, price.of("input"), price.of("output"), price.of("cache_read")) == (
        "project price: contract 2026", Decimal("2"), Decimal("10"), None)  # unknown is not free
    later = model_price(model="claude-sonnet-4-5", at=AT + timedelta(days=31), overrides=rows)
    assert (later.source, later.of("input"), later.of("cache_read")) == (
        "project price: contract 2027", Decimal("1.5"), Decimal("0.15"))
    # Before the project's first price, and for another model, the library's.
    assert model_price(model="claude-sonnet-4-5", at=AT - timedelta(days=60), overrides=rows).of("input") == 3
    assert model_price(model="gpt-4o", at=AT, overrides=rows).source.startswith("genai-prices")


@pytest.mark.django_db
def test_a_projects_price_for_one_provider_does_not_price_another():
    project = make_project("priced-provider")
    ModelPrice.objects.create(project=project, model="gpt-4o", provider="azure", input_mtok=Decimal("2"),
                              output_mtok=Decimal("8"), valid_from=AT - timedelta(days=1), note="azure")
    rows = list(project.model_prices.all())
    assert model_price(model="gpt-4o", provider="azure", at=AT, overrides=rows).of("input") == 2
    assert model_price(model="gpt-4o", provider="openai", at=AT, overrides=rows).of("input") == Decimal("2.5")
    assert model_price(model="gpt-4o", at=AT, overrides=rows).of("input") == 2  # no provider named: the project's


@pytest.mark.django_db
def test_a_projects_prices_are_edited_on_its_admin_page(admin_client):
    project = make_project("priced-admin")
    ModelPrice.objects.create(project=project, model="my-finetune", input_mtok=Decimal("4"), output_mtok=Decimal("16"),
                              valid_from=AT, note="our fine-tune")
    page = admin_client.get(f"/admin/telemetry/project/{project.pk}/change/").content.decode()
    assert 'name="model_prices-TOTAL_FORMS"' in page and 'value="my-finetune"' in page
