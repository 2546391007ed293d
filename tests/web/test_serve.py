"""`tracelore serve` and `tracelore db`: migrations, then a server that works with no configuration."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import httpx
import pytest
from alembic.script import ScriptDirectory
from click.testing import CliRunner

from app.cli import main
from app.store.migrate import alembic_config
from tests.support import SAMPLES, free_port, start_serve, stop_serve, wait_until_ready


def test_serve_migrates_and_serves_with_two_workers(tmp_path: Path, signatures_dir: Path) -> None:
    # A one-folder library keeps three processes' start-up cheap; the full library is tested elsewhere.
    small = tmp_path / "signatures"
    shutil.copytree(signatures_dir / "memory", small / "memory")
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_")}
    env.update({"TRACELORE_DATA_DIR": str(tmp_path / "data"), "TRACELORE_SIGNATURES_DIR": str(small)})
    proc = start_serve(env, port, workers=2)
    try:
        url = f"http://127.0.0.1:{port}"
        wait_until_ready(proc, url)
        assert (tmp_path / "data" / "tracelore.sqlite").is_file()
        assert "Tracelore" in httpx.get(url + "/", headers={"Accept": "text/html"}).text
        created = httpx.post(f"{url}/api/v1/diagnoses", content=(SAMPLES / "oom-killed.log").read_bytes())
        assert created.status_code == 201
        # Any worker can read what another stored.
        for _ in range(4):
            assert httpx.get(created.headers["location"]).status_code == 200
    finally:
        out = stop_serve(proc)
    assert f"serving on http://127.0.0.1:{port}/" in out


def test_db_commands(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRACELORE_DATABASE_URL", f"sqlite:///{tmp_path / 'cli.sqlite'}")
    runner = CliRunner()
    assert runner.invoke(main, ["db", "current"]).stdout.startswith("base")
    up = runner.invoke(main, ["db", "upgrade"])
    head = ScriptDirectory.from_config(alembic_config("sqlite://")).get_current_head()
    assert up.exit_code == 0 and f"revision {head}" in up.stdout
    assert runner.invoke(main, ["db", "current"]).stdout.strip() == head
    down = runner.invoke(main, ["db", "downgrade", "base"])
    assert down.exit_code == 0 and "base" in down.stdout
