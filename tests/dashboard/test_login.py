"""Login attempts are throttled (django-axes), on the dashboard's login and the admin's: after
LOGIN_FAILURE_LIMIT failures for one username from one address, that pair is refused, even with
the right password, until the cool-off ends. Each test's attempts are rows rolled back with it."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from tests import factories

PASSWORD = "correct horse battery staple"
LOGINS = [reverse("dashboard:login"), reverse("admin:login")]


@pytest.fixture
def user(db):
    user = factories.make_user("alice")
    user.set_password(PASSWORD)
    user.is_staff = True  # the admin's login form takes staff only
    user.save()
    return user


def attempt(client: Client, url: str, username: str, password: str, address: str = "10.0.0.1"):
    return client.post(url, {"username": username, "password": password}, REMOTE_ADDR=address)


def fail(client: Client, url: str, times: int, username: str = "alice", address: str = "10.0.0.1") -> None:
    for _ in range(times):
        assert attempt(client, url, username, "wrong", address).status_code == 200  # the form again


@pytest.mark.parametrize("url", LOGINS)
def test_the_right_password_logs_in(user, url):
    assert attempt(Client(), url, "alice", PASSWORD).status_code == 302


@pytest.mark.parametrize("url", LOGINS)
def test_too_many_failures_lock_the_login_even_for_the_right_password(user, url):
    client = Client()
    fail(client, url, settings.AXES_FAILURE_LIMIT - 1)
    locked = attempt(client, url, "alice", "wrong")
    assert locked.status_code == 429
    assert attempt(client, url, "alice", PASSWORD).status_code == 429
    assert "_auth_user_id" not in client.session


def test_the_lock_holds_for_one_username_from_one_address(user):
    url = LOGINS[0]
    fail(Client(), url, settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(Client(), url, "alice", "wrong").status_code == 429
    assert attempt(Client(), url, "alice", PASSWORD, address="10.0.0.2").status_code == 302  # another address
    bob = factories.make_user("bob")
    bob.set_password(PASSWORD)
    bob.save()
    assert attempt(Client(), url, "bob", PASSWORD).status_code == 302  # another user


def test_a_success_resets_the_count(user):
    url = LOGINS[0]
    fail(Client(), url, settings.AXES_FAILURE_LIMIT - 1)
    assert attempt(Client(), url, "alice", PASSWORD).status_code == 302
    fail(Client(), url, settings.AXES_FAILURE_LIMIT - 1)  # counting from zero again: not locked
    assert attempt(Client(), url, "alice", PASSWORD).status_code == 302
