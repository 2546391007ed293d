"""A wheel (what `pip install tracelore` gets) carries the signatures, templates, static files and migrations."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
import urllib.request
import venv
from pathlib import Path

from tests.support import free_port, stop_serve

REPO = Path(__file__).resolve().parents[1]

CHECK = """
from pathlib import Path
import app, sys
from app.config import Settings
from app.core import load_library
from app.store.migrate import MIGRATIONS
from app.web.templating import TEMPLATES
from app.web.app import STATIC
settings = Settings()
assert not Path(app.__file__).is_relative_to({repo!r}), app.__file__
assert settings.signatures_dir.is_relative_to(sys.prefix), settings.signatures_dir
print(len(load_library(settings.signatures_dir)), (TEMPLATES / "base.html").is_file(),
      (MIGRATIONS / "versions").is_dir(), (STATIC / "tracelore.css").is_file())
"""


def test_an_installed_wheel_finds_everything_it_reads(tmp_path: Path) -> None:
    before = (Path(sys.executable).parent / "tracelore").exists()
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "dist"), str(REPO)],
        check=True,
        capture_output=True,
    )
    env_dir = tmp_path / "env"
    # The new environment's own pip: `pip install --prefix` from this one would uninstall
    # this environment's tracelore first.
    venv.create(env_dir, with_pip=True)
    python = env_dir / "bin" / "python"
    site = Path(
        subprocess.run(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()
    )
    # Dependencies come from this environment; the package itself only from the wheel.
    (site / "deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    (wheel,) = (tmp_path / "dist").glob("tracelore-*.whl")
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(wheel)],
        check=True,
        capture_output=True,
    )
    out = subprocess.run(
        [python, "-c", CHECK.format(repo=str(REPO))], cwd=tmp_path, check=True, capture_output=True, text=True
    )
    count, templates, migrations, static = out.stdout.split()
    assert int(count) >= 88 and (templates, migrations, static) == ("True", "True", "True")
    assert (Path(sys.executable).parent / "tracelore").exists() == before  # this environment untouched


def test_the_sdist_builds_a_wheel_that_runs_in_a_clean_virtualenv(tmp_path: Path) -> None:
    """What `pipx install tracelore` does: the sdist built, its wheel installed with its dependencies
    resolved from the index into an empty virtualenv, then the two commands people start with."""
    dist = tmp_path / "dist"
    subprocess.run(
        [sys.executable, "-m", "build", "--outdir", str(dist), str(REPO)],
        check=True,
        capture_output=True,
    )
    (sdist,) = dist.glob("tracelore-*.tar.gz")
    (wheel,) = dist.glob("tracelore-*.whl")  # built from the sdist: the sdist holds what the wheel needs
    env_dir = tmp_path / "env"
    venv.create(env_dir, with_pip=True)
    bin_dir = env_dir / "bin"
    subprocess.run([bin_dir / "python", "-m", "pip", "install", "-q", str(wheel)], check=True, capture_output=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env |= {"TRACELORE_DATA_DIR": str(tmp_path / "data"), "TRACELORE_CACHE_DIR": str(tmp_path / "cache")}
    sample = REPO / "app" / "web" / "samples" / "ddp-cuda-oom.log"
    diagnosed = subprocess.run(
        [bin_dir / "tracelore", "diagnose", str(sample), "--format", "json"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
    )
    assert diagnosed.returncode == 1, diagnosed.stderr
    assert json.loads(diagnosed.stdout)["candidates"][0]["id"] == "cuda.oom"
    port = free_port()
    server = subprocess.Popen(
        [bin_dir / "tracelore", "serve", "--local", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as answer:
                    assert answer.status == 200
                    break
            except OSError:
                assert server.poll() is None and time.monotonic() < deadline, "the installed server did not start"
                time.sleep(0.2)
    finally:
        output = stop_serve(server)
    assert "Local mode" in output
    assert sdist.stat().st_size > 0
