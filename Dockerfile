# The runner image. Users get the official slim Python image; tests and offline builds pass
# --build-arg BASE_IMAGE=<a local image with python3 >= 3.11 and pip>.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /opt/skill-evals
COPY pyproject.toml README.md LICENSE ./
COPY runner ./runner
RUN python3 -m pip install --no-cache-dir . \
    && useradd --create-home --uid 10001 evals

USER evals
WORKDIR /work
ENTRYPOINT ["skill-evals"]
CMD ["--help"]
