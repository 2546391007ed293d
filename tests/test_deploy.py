"""The deployment files say what the self-hosting docs promise (no Docker engine here: check them as text)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import jsonschema
import yaml

from app.config import Settings

REPO = Path(__file__).resolve().parents[1]


def test_dockerfile_is_multi_stage_non_root_with_a_healthcheck() -> None:
    text = (REPO / "Dockerfile").read_text()
    assert text.count("\nFROM ") + text.startswith("FROM ") >= 2
    assert "\nUSER tracelore" in text and "HEALTHCHECK" in text and "/healthz" in text
    assert 'CMD ["tracelore", "serve"]' in text  # serve runs the migrations first
    assert "TRACELORE_WORKERS=" in text and "TRACELORE_HOST=0.0.0.0" in text
    for folder in ("app", "signatures", "templates", "migrations"):
        assert f"COPY {folder} ./{folder}" in text
    known = {f"TRACELORE_{name.upper()}" for name in Settings.model_fields}
    assert set(re.findall(r"TRACELORE_[A-Z_]+", text)) <= known


def _compose() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((REPO / "compose.yaml").read_text())
    return loaded


def test_compose_runs_two_instances_on_postgresql_behind_a_proxy_they_alone_trust() -> None:
    compose = _compose()
    services = compose["services"]
    apps = {name: s for name, s in services.items() if s.get("build") == "."}
    assert len(apps) >= 2
    proxy = services["proxy"]
    assert proxy["image"].startswith("caddy:") and proxy["volumes"] == ["./deploy/Caddyfile:/etc/caddy/Caddyfile:ro"]
    assert proxy["environment"]["TRACELORE_UPSTREAMS"].split() == [f"{name}:8000" for name in apps]
    proxy_address = proxy["networks"]["backend"]["ipv4_address"]
    assert compose["services"]["db"]["image"].startswith("postgres:")
    for app in apps.values():
        env = app["environment"]
        assert env["TRACELORE_DATABASE_URL"].startswith("postgresql://")
        assert Settings(database_url=env["TRACELORE_DATABASE_URL"]).database_url.startswith("postgresql+psycopg://")
        assert app["depends_on"]["db"]["condition"] == "service_healthy"
        assert env["TRACELORE_FORWARDED_ALLOW_IPS"] == proxy_address  # the proxy alone
        assert "ports" not in app  # reached through the proxy only
    known = {f"TRACELORE_{name.upper()}" for name in Settings.model_fields}
    assert {k for app in apps.values() for k in app["environment"]} <= known


def test_compose_file_is_valid() -> None:
    """`docker compose config` where Docker Compose is installed; the Compose Specification's JSON schema always."""
    has_compose = shutil.which("docker") and subprocess.run(["docker", "compose", "version"], capture_output=True)
    if has_compose and has_compose.returncode == 0:
        subprocess.run(["docker", "compose", "-f", str(REPO / "compose.yaml"), "config", "-q"], check=True)
    schema = json.loads((REPO / "tests" / "data" / "compose-spec.json").read_text())
    jsonschema.Draft7Validator(schema).validate(_compose())  # the draft its $schema names


def test_the_cluster_test_runs_the_compose_topology() -> None:
    """tests/web/test_cluster.py starts the proxy with the very Caddyfile compose mounts, before as many instances."""
    from bench.cluster import CADDYFILE, cluster

    assert CADDYFILE == REPO / "deploy" / "Caddyfile"
    apps = [name for name, s in _compose()["services"].items() if s.get("build") == "."]
    assert inspect.signature(cluster).parameters["instances"].default == len(apps)
    if shutil.which("caddy"):
        env = {**os.environ, "TRACELORE_UPSTREAMS": "127.0.0.1:1 127.0.0.1:2"}
        run = subprocess.run(
            ["caddy", "validate", "--config", str(CADDYFILE), "--adapter", "caddyfile"],
            env=env,
            capture_output=True,
            text=True,
        )
        assert run.returncode == 0, run.stderr


def test_the_image_installs_locked_versions_of_every_runtime_dependency() -> None:
    root = Path(__file__).resolve().parents[1]
    dockerfile = (root / "Dockerfile").read_text()
    assert "pip install -r requirements.lock" in dockerfile
    locked = {
        re.split(r"==", line)[0].lower().replace("_", "-")
        for line in (root / "requirements.lock").read_text().splitlines()
        if line and not line.startswith("#")
    }
    project = tomllib.loads((root / "pyproject.toml").read_text())["project"]
    wanted = project["dependencies"] + project["optional-dependencies"]["postgres"]
    names = {re.split(r"[\[<>=!~ ;]", dep)[0].lower().replace("_", "-") for dep in wanted}
    assert names - locked == set()


def test_the_image_runs_the_package_from_byte_code_it_compiled_at_build(tmp_path: Path) -> None:
    """The image forbids writing byte code at run time, so its build must have written it.

    The Dockerfile's own compile step runs on a copy of `app/` laid out as in the image; a
    command there, with the image's PYTHONDONTWRITEBYTECODE, then loads every module of the
    package from byte code, compiling none from source.
    """
    text = (REPO / "Dockerfile").read_text()
    runtime = text.rsplit("\nFROM ", 1)[1]
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime
    (step,) = re.findall(r"^RUN (python -m compileall .*)$", runtime, re.M)
    assert runtime.index("COPY app ./app") < runtime.index(step) < runtime.index("\nUSER ")
    srv = tmp_path / "srv"
    shutil.copytree(REPO / "app", srv / "app", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "signatures", srv / "signatures")
    env = {**os.environ, "PYTHONPATH": str(srv), "TRACELORE_CACHE_DIR": str(tmp_path / "cache")}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    subprocess.run([sys.executable, *shlex.split(step)[1:]], cwd=srv, env=env, check=True)
    log = tmp_path / "train.log"
    log.write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    run = subprocess.run(
        [sys.executable, "-v", "-m", "app", "diagnose", str(log)], cwd=srv, env=env, capture_output=True, text=True
    )
    loaded = re.findall(rf"^# code object from '?({re.escape(str(srv))}/app/\S+?)'?$", run.stderr, re.M)
    assert len(loaded) > 20, run.stderr[-2000:]
    assert [path for path in loaded if not path.endswith(".pyc")] == []
