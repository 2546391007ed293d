# Tracelore: the web service. `tracelore serve` migrates the database, then serves on port 8000.
# Build: docker build -t tracelore .    Run: docker run -p 8000:8000 -v tracelore-data:/data tracelore

FROM python:3.11-slim AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# The locked dependencies first, so a change of the code does not reinstall them.
COPY requirements.lock ./
RUN pip install -r requirements.lock
# Then the wheel a release ships, built from this tree, installed without re-resolving: the image
# runs what `pip install tracelore` installs (tests/test_packaging.py builds and runs the same
# wheel). pip writes the package's byte code as it installs it.
COPY pyproject.toml README.md ./
COPY app ./app
COPY signatures ./signatures
COPY templates ./templates
COPY migrations ./migrations
RUN pip wheel --no-deps --wheel-dir /dist . && pip install --no-deps /dist/tracelore-*.whl

FROM python:3.11-slim
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    TRACELORE_HOST=0.0.0.0 \
    TRACELORE_PORT=8000 \
    TRACELORE_DATA_DIR=/data \
    TRACELORE_WORKERS=2
RUN useradd --system --uid 10001 --home-dir /srv/tracelore --shell /usr/sbin/nologin tracelore \
    && mkdir -p /data \
    && chown tracelore /data
WORKDIR /srv/tracelore
# The virtualenv holds everything: the package, and the signatures, templates and migrations
# it reads, installed as the wheel's data under /opt/venv/share/tracelore.
COPY --from=build /opt/venv /opt/venv
USER tracelore
EXPOSE 8000
VOLUME ["/data"]
HEALTHCHECK --interval=30s --timeout=5s --start-period=40s --retries=3 \
    CMD python -c "import os, urllib.request as u; u.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('TRACELORE_PORT', '8000'), timeout=4)" || exit 1
# Migrations, then uvicorn with TRACELORE_WORKERS workers; SIGTERM finishes requests in flight.
CMD ["tracelore", "serve"]
