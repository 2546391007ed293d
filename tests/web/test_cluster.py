"""The deployed topology, run here without containers (compose.yaml's, bench/cluster.py): two
`tracelore serve` instances of two workers on one PostgreSQL, behind Caddy running deploy/Caddyfile.

Under load through the proxy: both instances serve, the daily allowance is exact across them and
ignores forged X-Forwarded-For, no 5xx, and each periodic job runs exactly once a period (counted
in the job queue's own tables) although all four workers offer it. Then the instance running a long
learning summary is killed with SIGKILL: the other instance takes the job over and finishes it from
the last committed batch.

TRACELORE_TEST_CLUSTER_SECONDS sets the load's length (60 s by default; the issue's ten minutes
is `bench/capacity.py --minutes 10`). Without Caddy (`apt-get install caddy`) the tests skip.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from bench.cluster import REPO, Cluster, cluster

pytestmark = pytest.mark.skipif(shutil.which("caddy") is None, reason="no Caddy for the proxy: apt-get install caddy")

LOAD_SECONDS = float(os.environ.get("TRACELORE_TEST_CLUSTER_SECONDS") or 60)
PERIOD = 10  # TRACELORE_LEARN_EVERY: the learning summary every 10 s, so a minute holds six periods
ANONYMOUS = 25  # the daily allowance without an account
LOG = (REPO / "app" / "web" / "samples" / "ddp-cuda-oom.log").read_bytes()
TEXT = {"content-type": "text/plain"}


@pytest.fixture(scope="module")
def running(make_pg_database: Callable[[], str], tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    folder = tmp_path_factory.mktemp("cluster")
    with cluster(
        make_pg_database(),
        folder,
        learn_every=str(PERIOD),
        quota_anonymous=str(ANONYMOUS),
        quota_pro="1000000",
        max_upload_bytes=str(1 << 20),
    ) as running:
        yield running


def _admin(running: Cluster, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app", "admin", *args], env=running.env, cwd=REPO, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def _jobs(running: Cluster, task: str) -> list[tuple[int, str, int, int]]:
    """(job id, status, period's time, times started) of every job of a periodic task."""
    rows = running.sql(
        "SELECT j.id, j.status::text, (j.args->>'timestamp')::bigint,"
        " (SELECT count(*) FROM procrastinate_events e WHERE e.job_id = j.id AND e.type = 'started')"
        " FROM procrastinate_jobs j WHERE j.task_name = :task ORDER BY j.id",
        task=task,
    )
    return [(int(i), str(s), int(t), int(n)) for i, s, t, n in rows]  # type: ignore[call-overload]


def _load(running: Cluster, key: str, seconds: float, statuses: Counter[int]) -> None:
    """Diagnoses sent through the proxy by 4 clients with a pro key, for `seconds`."""
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def client() -> None:
        with httpx.Client(base_url=running.url, timeout=60, headers={"Authorization": f"Bearer {key}"}) as c:
            while time.monotonic() < end:
                r = c.post("/api/v1/diagnoses", content=LOG, headers=TEXT)
                with lock:
                    statuses[r.status_code] += 1

    with ThreadPoolExecutor(4) as pool:
        for f in [pool.submit(client) for _ in range(4)]:
            f.result()


def test_two_instances_share_traffic_allowances_and_run_each_job_once_a_period(running: Cluster) -> None:
    _admin(running, "set-tier", "load@example.org", "pro")
    key = _admin(running, "create-key", "load@example.org").splitlines()[-1]
    start = time.time()
    statuses: Counter[int] = Counter()
    loader = threading.Thread(target=_load, args=(running, key, LOAD_SECONDS, statuses))
    loader.start()

    # One anonymous client sends 60 at once through the proxy, each with a forged X-Forwarded-For:
    # the proxy replaces the header, so all 60 count against one allowance, on both instances.
    def anonymous(_: int) -> int:
        forged = {"X-Forwarded-For": f"198.51.100.{random.randrange(1, 255)}", **TEXT}
        return httpx.post(f"{running.url}/api/v1/diagnoses", content=LOG, headers=forged, timeout=60).status_code

    with ThreadPoolExecutor(16) as pool:
        burst = Counter(pool.map(anonymous, range(60)))
    assert burst == {201: ANONYMOUS, 429: 60 - ANONYMOUS}, burst
    # Straight to an instance from an address that is not the proxy's: the header is not believed
    # (else this client would be taken for 127.0.0.1, whose allowance is spent).
    direct = httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.2"), timeout=60)
    with direct:
        r = direct.post(
            f"{running.instances[1].url}/api/v1/diagnoses",
            content=LOG,
            headers={"X-Forwarded-For": "127.0.0.1", **TEXT},
        )
    assert r.status_code == 201, r.text
    loader.join()
    end = time.time()

    assert statuses and set(statuses) == {201}, statuses  # no 5xx, no 429, no shedding
    served = [instance.served() for instance in running.instances]
    assert all(s.get("201", 0) > 10 for s in served), served  # the proxy used both instances

    # Each period's summary ran once, though four workers offered it; so did the stalled-job check.
    time.sleep(PERIOD + 5)  # the last period's job finishes
    first, last = int(start) // PERIOD * PERIOD + PERIOD, int(end) // PERIOD * PERIOD
    for task, every in (("tracelore.learn", PERIOD), ("tracelore.retry_stalled", 10)):
        jobs = [j for j in _jobs(running, task) if first <= j[2] <= last]
        assert [j[2] for j in jobs] == list(range(first, last + 1, every)), (task, jobs)
        assert {(status, started) for _, status, _, started in jobs} == {("succeeded", 1)}, (task, jobs)
    # Every diagnosis was counted into the statistics once.
    ((rows, counted),) = running.sql(
        "SELECT (SELECT count(*) FROM diagnosis_failures), (SELECT sum(diagnoses) FROM failure_days)"
    )
    assert rows == counted and rows > 0


def test_a_job_whose_instance_is_killed_is_finished_by_the_other(running: Cluster) -> None:
    # A long summary: 30,000 unknown lines of distinct clusters, none the library knows.
    # Through the proxy from another address: an allowance of its own (127.0.0.1's is spent).
    with httpx.Client(transport=httpx.HTTPTransport(local_address="127.0.0.3"), timeout=60) as other:
        r = other.post(f"{running.url}/api/v1/diagnoses", content=LOG, headers=TEXT)
    assert r.status_code == 201, r.text
    total = 30_000
    running.sql(
        "INSERT INTO unknown_lines (diagnosis_id, key, template, text, kind, library_version, created_at)"
        " SELECT :id, 'k' || lpad(i::text, 15, '0'), 'FrobError: shard <NUM>',"
        " 'FrobError: shard ' || i || ' of the flux capacitor is out of phase', 'unexplained', 'test', now()"
        " FROM generate_series(1, :n) AS i",
        id=r.json()["id"],
        n=total,
    )
    waiting = "SELECT count(*) FROM unknown_lines WHERE NOT checked"
    deadline = time.monotonic() + 120
    job, pid = None, 0
    while job is None:  # a summary is checking them, with a batch committed
        assert time.monotonic() < deadline, "no summary took the lines"
        doing = running.sql(
            "SELECT id FROM procrastinate_jobs WHERE task_name = 'tracelore.learn' AND status = 'doing'"
        )
        # The process whose connection is in a batch of the summary (connections are named by process).
        holder = running.sql(
            "SELECT application_name FROM pg_stat_activity WHERE query LIKE 'UPDATE unknown_lines%'"
            " AND state IN ('active', 'idle in transaction') AND application_name LIKE 'tracelore %'"
        )
        ((left,),) = running.sql(waiting)
        if doing and holder and left <= total - 2000:
            job, pid = int(str(doing[0][0])), int(str(holder[0][0]).split()[-1])
        time.sleep(0.05)
    (doomed,) = [i for i in running.instances if pid in i.pids()]
    doomed.kill()
    ((left,),) = running.sql(waiting)
    assert 0 < left < total - 1000, left  # killed with batches done and work left

    # The other instance queues the job again once the dead worker's heartbeat is 20 s old,
    # and finishes it; the proxy meanwhile sends everyone to the live instance.
    with httpx.Client(base_url=running.url, timeout=60) as client:
        while True:
            ((status, started),) = running.sql(
                "SELECT status::text, (SELECT count(*) FROM procrastinate_events e"
                " WHERE e.job_id = :id AND e.type = 'started') FROM procrastinate_jobs WHERE id = :id",
                id=job,
            )
            if status == "succeeded":
                break
            assert time.monotonic() < deadline + 180, (status, started)
            assert client.get("/healthz").status_code == 200
            time.sleep(1)
    assert started == 2  # once on the killed instance, once on the other
    assert running.sql(waiting) == [(0,)]
    # The run that finished began at the last committed batch: it checked what was left, not all.
    ((last,),) = running.sql("SELECT value FROM learning_state WHERE name = 'summary.last_run'")
    assert json.loads(str(last))["checked"] <= left
