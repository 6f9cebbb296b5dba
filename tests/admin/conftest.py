"""An operator logged in to the admin, and admin URLs by model."""

from __future__ import annotations

import pytest
from django.db.models import Model
from django.urls import reverse


@pytest.fixture
def root_client(client, superuser):
    client.force_login(superuser)
    return client


def admin_url(model: type[Model], view: str, *args) -> str:
    opts = model._meta
    return reverse(f"admin:{opts.app_label}_{opts.model_name}_{view}", args=args)


def change_url(obj: Model) -> str:
    return admin_url(type(obj), "change", obj.pk)
