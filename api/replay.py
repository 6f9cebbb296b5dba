"""The headers Django gives a 304 from GET /api/v1/policy, for the layer that answers it without
Django (api/fastpath.py).

They are produced by the code that produces them in Django, run on a probe request: the view's
own header helper, DRF's default headers (Allow) and the process_response of each middleware in
REPLAYED_MIDDLEWARE that adds headers. api/fastpath.py runs this when it starts, under the
settings it serves with. The other middleware in that list add nothing to a 304 of an API view
(no session, cookie, CSRF token or message is touched; api/middleware.py adds X-Request-ID to error
answers only; axes answers only a locked-out login). A test compares the result with a 304
that went through Django.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponseNotModified
from django.middleware.clickjacking import XFrameOptionsMiddleware
from django.middleware.common import CommonMiddleware
from django.middleware.security import SecurityMiddleware

from api.views.policy import PolicyView, _cacheable

# The MIDDLEWARE setting the replay is exact for (toolscope/settings.py).
REPLAYED_MIDDLEWARE = (
    "api.middleware.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "axes.middleware.AxesMiddleware",
)
# Those that add headers to this response, innermost first (the order Django runs them in).
HEADER_MIDDLEWARE = (XFrameOptionsMiddleware, CommonMiddleware, SecurityMiddleware)


class _Probe(HttpRequest):
    def __init__(self, secure: bool) -> None:
        super().__init__()
        self.method = "GET"
        self._secure = secure

    def is_secure(self) -> bool:
        return self._secure


def _no_view(request: HttpRequest) -> None:
    raise AssertionError("only process_response is replayed")


def replayed_headers(secure: bool) -> tuple[tuple[str, str], ...]:
    """Every header of the 304 except ETag, for a request that is (or is not) https."""
    request = _Probe(secure)
    response = _cacheable(HttpResponseNotModified(), "")
    view = PolicyView()
    view.setup(request)  # adds HEAD, as serving a request does, which shows in Allow
    for name, value in view.default_response_headers.items():
        response[name] = value
    for middleware in HEADER_MIDDLEWARE:
        response = middleware(_no_view).process_response(request, response)
    return tuple((name, value) for name, value in response.items() if name != "ETag")
