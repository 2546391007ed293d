# Tracelore: the web service. `tracelore serve` migrates the database, then serves on port 8000.
# Build: docker build -t tracelore .    Run: docker run -p 8000:8000 -v tracelore-data:/data tracelore

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependencies first, so a code change does not reinstall them.
COPY pyproject.toml README.md requirements.lock ./
COPY app/__init__.py app/__init__.py
# Locked versions first (what the image ships), then the package itself without re-resolving.
RUN pip install -r requirements.lock && pip install --no-deps '.[postgres]'

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PYTHONPATH=/srv/tracelore \
    TRACELORE_HOST=0.0.0.0 \
    TRACELORE_PORT=8000 \
    TRACELORE_DATA_DIR=/data \
    TRACELORE_WORKERS=2
RUN useradd --system --uid 10001 --home-dir /srv/tracelore --shell /usr/sbin/nologin tracelore \
    && mkdir -p /data \
    && chown tracelore /data
WORKDIR /srv/tracelore
COPY --from=build /opt/venv /opt/venv
# The package runs from here (PYTHONPATH), next to the folders it reads at run time.
COPY app ./app
COPY signatures ./signatures
COPY templates ./templates
COPY migrations ./migrations
# Byte code written now, as root: with PYTHONDONTWRITEBYTECODE every process would otherwise
# compile the package's sources again (about 80 ms of CPU per `tracelore` command).
RUN python -m compileall -q app
USER tracelore
EXPOSE 8000
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
    CMD python -c "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TRACELORE_PORT', '8000'), timeout=4)" || exit 1
# Migrations, then uvicorn with TRACELORE_WORKERS workers; SIGTERM finishes requests in flight.
CMD ["tracelore", "serve"]
