"""manage.py createproject: a project, its draft policy, an admin owner and a key shown once."""

import re
from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from tests import factories
from toolscope.policies.models import Policy, SelectionMode
from toolscope.telemetry.models import ApiKey, Membership, Project, Role
from toolscope.telemetry.services import projects
from toolscope.telemetry.services.api_keys import api_key_verify
from toolscope.telemetry.services.projects import project_create

KEY_PATTERN = re.compile(r"ts_[0-9a-f]+_[A-Za-z0-9_-]+")


def _create(*args: str) -> str:
    out = StringIO()
    call_command("createproject", *args, stdout=out)
    return out.getvalue()


@pytest.fixture(autouse=True)
def fast_password_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def created_output(db):
    return _create("acme-coder", "--name", "Acme coder", "--owner", "alice", "--owner-email", "alice@example.com")


def test_creates_the_project_with_its_draft_policy(created_output):
    project = Project.objects.get(slug="acme-coder")
    assert project.name == "Acme coder"
    assert project.encoding == "o200k_base"
    assert project.context_window == 200_000
    assert Policy.objects.get(project=project).mode == SelectionMode.ALL


def test_creates_the_owner_as_project_admin_and_prints_the_password_once(created_output):
    owner = get_user_model().objects.get(username="alice")
    assert owner.email == "alice@example.com"
    membership = Membership.objects.get(project__slug="acme-coder")
    assert (membership.user, membership.role) == (owner, Role.ADMIN)
    password = re.search(r"Owner password: (\S+)", created_output).group(1)
    assert owner.check_password(password)
    assert created_output.count(password) == 1


def test_prints_a_key_that_verifies_once_with_a_warning(created_output):
    secrets_printed = KEY_PATTERN.findall(created_output)
    assert len(secrets_printed) == 1
    key = api_key_verify(raw=secrets_printed[0])
    assert key is not None
    assert key.project.slug == "acme-coder"
    assert sorted(key.scopes) == ["ingest", "policy:read"]
    assert "will not be shown again" in created_output


def test_an_existing_owner_is_reused_and_no_password_is_printed(db):
    user = factories.make_user("bob")
    output = _create("globex", "--name", "Globex", "--owner", "bob")
    assert Membership.objects.get(project__slug="globex").user == user
    assert "Owner password" not in output
    assert user.check_password("pw-bob")


def test_encoding_and_context_window_are_stored(db):
    _create("small", "--name", "Small", "--owner", "carol", "--encoding", "cl100k_base", "--context-window", "8192")
    project = Project.objects.get(slug="small")
    assert (project.encoding, project.context_window) == ("cl100k_base", 8192)


def test_an_existing_slug_is_an_error_and_creates_nothing(created_output):
    with pytest.raises(CommandError, match="already exists"):
        _create("acme-coder", "--name", "Again", "--owner", "dave")
    assert Project.objects.count() == 1
    assert ApiKey.objects.count() == 1
    assert not get_user_model().objects.filter(username="dave").exists()


@pytest.mark.parametrize("slug", ["Not a slug", "a/b", "ünïcode!", "x" * 65])
def test_a_bad_slug_is_an_error(db, slug):
    with pytest.raises(CommandError, match="slug"):
        _create(slug, "--name", "Bad", "--owner", "erin")
    assert not Project.objects.exists()


def test_a_bad_encoding_is_an_error(db):
    with pytest.raises(CommandError, match="encoding"):
        _create("enc", "--name", "Enc", "--owner", "erin", "--encoding", "p50k_base")
    assert not Project.objects.exists()


def test_a_too_small_context_window_is_an_error(db):
    with pytest.raises(CommandError, match="context window"):
        _create("tiny", "--name", "Tiny", "--owner", "erin", "--context-window", "100")


def test_a_bad_owner_username_is_an_error(db):
    with pytest.raises(CommandError, match="username"):
        _create("own", "--name", "Own", "--owner", "no spaces allowed")
    assert not Project.objects.exists()


def test_the_service_is_transactional(db, monkeypatch):
    def failing_key(**kwargs):
        raise RuntimeError("key store down")

    monkeypatch.setattr(projects, "api_key_create", failing_key)
    with pytest.raises(RuntimeError):
        project_create(slug="atomic", name="Atomic", owner="frank", encoding="o200k_base", context_window=200_000)
    assert not Project.objects.filter(slug="atomic").exists()
    assert not get_user_model().objects.filter(username="frank").exists()
