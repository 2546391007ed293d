"""/metrics of `tracelore serve --workers 2` counts what every worker served (prometheus-client's
multiprocess mode), and the directory the workers share is clean at start and gone at stop."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from prometheus_client.mmap_dict import MmapedDict
from prometheus_client.multiprocess import MultiProcessCollector

from app.web.metrics_dir import MULTIPROC_ENV, metrics_directory
from tests.support import METRICS_AUTH, METRICS_TOKEN, SAMPLES, free_port, start_serve, stop_serve, wait_until_ready

OOM = (SAMPLES / "ddp-cuda-oom.log").read_bytes()


def _pids_that_diagnosed(directory: Path) -> set[int]:
    """Processes whose own histogram file counted a diagnosis."""
    pids: set[int] = set()
    for file in directory.glob("histogram_*.db"):
        for metric in MultiProcessCollector.merge([str(file)]):
            if any(s.name == "tracelore_diagnosis_seconds_count" and s.value > 0 for s in metric.samples):
                pids.add(int(file.stem.rpartition("_")[2]))
    return pids


def test_a_scrape_counts_the_requests_every_worker_served(tmp_path: Path, signatures_dir: Path) -> None:
    small = tmp_path / "signatures"  # one folder of signatures keeps three processes' start-up cheap
    shutil.copytree(signatures_dir / "memory", small / "memory")
    temp = tmp_path / "tmp"  # where the server makes its metrics directory
    temp.mkdir()
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_") and k != MULTIPROC_ENV}
    env.update(
        {
            "TRACELORE_DATA_DIR": str(tmp_path / "data"),
            "TRACELORE_SIGNATURES_DIR": str(small),
            "TRACELORE_METRICS_TOKEN": METRICS_TOKEN,
            "TRACELORE_QUOTA_ANONYMOUS": "100000",
            "TMPDIR": str(temp),
        }
    )
    proc = start_serve(env, port, workers=2)
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_ready(proc, url)
        (directory,) = temp.glob("tracelore-metrics-*")
        # Each request on a new connection, until both workers have diagnosed some.
        served = 0
        deadline = time.monotonic() + 60
        while len(_pids_that_diagnosed(directory)) < 2:
            assert time.monotonic() < deadline and served < 500, f"one worker took all {served} requests"
            assert httpx.post(f"{url}/api/v1/diagnoses?store=false", content=OOM).status_code == 200
            served += 1
        assert proc.pid not in _pids_that_diagnosed(directory)  # the two are workers, not the supervisor
        scrapes = [httpx.get(f"{url}/metrics", headers=METRICS_AUTH) for _ in range(8)]
    finally:
        stop_serve(proc)
    assert served >= 2
    for scrape in scrapes:  # whichever worker answered, it counts both workers' requests
        assert scrape.status_code == 200 and scrape.headers["content-type"].startswith("text/plain")
        lines = scrape.text.splitlines()
        assert (
            f'tracelore_http_requests_total{{method="POST",route="/api/v1/diagnoses",status="200"}} {served}.0' in lines
        )
        assert f"tracelore_diagnosis_seconds_count {served}.0" in lines
        assert f'tracelore_candidates_total{{id="cuda.oom",role="initiating"}} {served}.0' in lines
        assert "tracelore_diagnoses_in_flight 0.0" in lines
    assert not directory.exists()  # removed when the server stopped


def test_without_a_directory_given_serve_makes_a_private_one_and_removes_it(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MULTIPROC_ENV, raising=False)
    with metrics_directory() as directory:
        assert os.environ[MULTIPROC_ENV] == str(directory)
        assert directory.is_dir() and not any(directory.iterdir())
        assert directory.stat().st_mode & 0o077 == 0  # other users can neither read nor plant counts
        (directory / "counter_1.db").write_bytes(b"")
    assert MULTIPROC_ENV not in os.environ and not directory.exists()


def test_a_directory_the_operator_gives_is_emptied_of_an_earlier_runs_counts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    given = tmp_path / "metrics"
    given.mkdir()
    earlier = MmapedDict(str(given / "counter_4242.db"))  # what a worker of an earlier run left
    earlier.write_value('["tracelore_http_requests", "tracelore_http_requests_total", {}, "doc"]', 7.0, 0.0)
    earlier.close()
    assert MultiProcessCollector.merge([str(given / "counter_4242.db")])
    (given / "README").write_text("kept: not the library's\n")
    monkeypatch.setenv(MULTIPROC_ENV, str(given))
    with metrics_directory() as directory:
        assert directory == given and sorted(p.name for p in given.iterdir()) == ["README"]
    assert os.environ[MULTIPROC_ENV] == str(given) and given.is_dir()  # the operator's, left in place


def test_a_worker_that_died_mid_diagnosis_leaves_its_counts_but_not_its_in_flight(tmp_path: Path) -> None:
    directory = tmp_path / "metrics"
    directory.mkdir()
    env = {**os.environ, MULTIPROC_ENV: str(directory)}
    dies = (  # a worker killed while it held a diagnosis: no code after this runs
        "import os; from app.web.metrics import Metrics; m = Metrics(); "
        "m.request('POST', '/api/v1/diagnoses', 201); m.add_in_flight(1); os._exit(1)"
    )
    scrapes = "from app.web.metrics import Metrics; print(Metrics().render()[0].decode())"
    died = subprocess.run([sys.executable, "-c", dies], env=env, cwd=Path(__file__).parents[2])
    assert died.returncode == 1 and len(list(directory.glob("gauge_livesum_*.db"))) == 1
    text = subprocess.run(
        [sys.executable, "-c", scrapes],
        env=env,
        cwd=Path(__file__).parents[2],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    assert 'tracelore_http_requests_total{method="POST",route="/api/v1/diagnoses",status="201"} 1.0' in text
    assert "tracelore_diagnoses_in_flight 0.0" in text
