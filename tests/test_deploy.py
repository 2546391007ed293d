"""The deployment files say what the self-hosting docs promise (no Docker engine here: check them as text)."""

from __future__ import annotations

import inspect
import json
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import tomllib
import venv
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


def test_the_image_runs_the_wheel_it_built_from_byte_code_pip_wrote(tmp_path: Path) -> None:
    """The image installs the wheel a release ships and forbids writing byte code at run time, so
    pip must have written it at build. The build stage's step runs here on this tree (a wheel, then
    its install into a virtualenv); a command of that install, with the image's
    PYTHONDONTWRITEBYTECODE, then loads every module of the package from byte code."""
    text = (REPO / "Dockerfile").read_text()
    build, runtime = text.rsplit("\nFROM ", 1)
    assert "PYTHONDONTWRITEBYTECODE=1" in runtime and "COPY --from=build /opt/venv /opt/venv" in runtime
    assert "COPY app" not in runtime and "PYTHONPATH" not in runtime  # the package comes from the wheel only
    (step,) = re.findall(r"^RUN (pip wheel .*)$", build, re.M)
    assert build.index("COPY migrations ./migrations") < build.index(step)
    env_dir = tmp_path / "opt-venv"
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = subprocess.run(
        [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    # The locked dependencies come from this environment; the package only from the wheel the step builds.
    (Path(site) / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    wheel_step, install_step = (part.strip() for part in step.split("&&"))
    dist = tmp_path / "dist"
    subprocess.run(
        [python, "-m", *shlex.split(wheel_step.replace("/dist", str(dist)))], cwd=REPO, check=True, capture_output=True
    )
    (wheel,) = dist.glob("tracelore-*.whl")
    assert install_step == "pip install --no-deps /dist/tracelore-*.whl"
    subprocess.run([python, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], check=True, capture_output=True)
    log = tmp_path / "train.log"
    log.write_text("step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env |= {"PYTHONDONTWRITEBYTECODE": "1", "TRACELORE_CACHE_DIR": str(tmp_path / "cache")}
    run = subprocess.run(
        [python, "-v", "-m", "app", "diagnose", str(log)], cwd=tmp_path, env=env, capture_output=True, text=True
    )
    assert run.returncode == 1, run.stderr[-2000:]
    loaded = re.findall(rf"^# code object from '?({re.escape(site)}/app/\S+?)'?$", run.stderr, re.M)
    assert len(loaded) > 20, run.stderr[-2000:]
    assert [path for path in loaded if not path.endswith(".pyc")] == []
