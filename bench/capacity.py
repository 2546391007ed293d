"""Capacity of the deployed topology: two `tracelore serve` instances (two workers each) on one
PostgreSQL behind Caddy (bench/cluster.py, the topology of compose.yaml), loaded through the proxy.

    apt-get install -y caddy wrk
    .venv/bin/python bench/capacity.py --minutes 10

Reports, for the load's whole length:
* diagnoses per second, and per core: per CPU second of the servers, and of everything the
  request path runs on (servers, proxy, PostgreSQL), which is what a machine must provide;
* p50/p99 latency at the client (wrk), and the answers that were not 201 (5xx must be none);
* quota exactness: a burst of anonymous requests (forged X-Forwarded-For) against a small
  allowance admits exactly the allowance, and every subject's counter equals its stored diagnoses;
* job runs per period: each periodic job's runs counted in the job queue's tables (exactly one a
  period, each started once, although every worker offers it);
* where the ceiling is: the servers' CPU per diagnosis against an in-process `diagnose()` of the
  same log (the matcher's share), and PostgreSQL's CPU and commits per diagnosis (the writes).

The load generator (wrk) runs on the same machine and takes CPU of its own, as the proxy does:
figures per core are per CPU second actually spent, not per core of the machine.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from bench.api import WRK_SCRIPT  # noqa: E402
from bench.cluster import REPO, Cluster, cluster  # noqa: E402
from bench.cpu import TICKS, diagnose_cpu_ms, tree_cpu_seconds  # noqa: E402

LOG = REPO / "app" / "web" / "samples" / "ddp-cuda-oom.log"
ANONYMOUS = 50  # the anonymous allowance the quota burst is sent against
BURST = 200
OUT = REPO / "bench" / "out"
WRK_BODY = """
  local f = assert(io.open(%s, "rb"))
  wrk.method = "POST"
  wrk.body = f:read("*a")
  wrk.headers["Content-Type"] = "text/plain"
  wrk.headers["Authorization"] = "Bearer %s"
  f:close()
"""


def postgres_cpu_seconds() -> float:
    """CPU seconds of every PostgreSQL process on this machine (the server the instances share)."""
    total = 0.0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        name, fields = stat[stat.index("(") + 1 : stat.rindex(")")], stat.rsplit(")", 1)[1].split()
        if name.startswith("postgres") or name.startswith("postmaster"):
            total += (int(fields[11]) + int(fields[12])) / TICKS
    return total


def database_stats(url: str) -> dict[str, int]:
    engine = create_engine(url)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                text(
                    "SELECT xact_commit, tup_inserted, tup_updated, tup_deleted FROM pg_stat_database"
                    " WHERE datname = current_database()"
                )
            ).one()
    finally:
        engine.dispose()
    return dict(zip(("commits", "inserted", "updated", "deleted"), (int(v) for v in row), strict=True))


def admin(running: Cluster, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "app", "admin", *args], env=running.env, cwd=REPO, capture_output=True, text=True
    )
    if done.returncode:
        raise SystemExit(done.stderr)
    return done.stdout.strip().splitlines()[-1]


def wrk(url: str, key: str, seconds: float, connections: int, scratch: Path) -> dict[str, float]:
    script = scratch / "capacity.lua"
    script.write_text(WRK_SCRIPT % {"body": WRK_BODY % (json.dumps(str(LOG)), key)})
    cmd = ["wrk", "-t", "1", "-c", str(connections), "-d", f"{seconds:g}s", "--timeout", "30s", "-s", str(script)]
    out = subprocess.run([*cmd, f"{url}/api/v1/diagnoses"], capture_output=True, text=True, timeout=seconds + 120)
    found = re.search(r"TRACELORE (.*)", out.stdout)
    if not found:
        raise SystemExit(f"wrk printed no result:\n{out.stdout}\n{out.stderr}")
    return {k: float(v) for k, v in (kv.split("=") for kv in found.group(1).split())}


def quota_burst(url: str) -> Counter[int]:
    """BURST anonymous requests at once through the proxy, each with a forged X-Forwarded-For."""

    def one(_: int) -> int:
        headers = {"X-Forwarded-For": f"198.51.100.{random.randrange(1, 255)}", "content-type": "text/plain"}
        return httpx.post(f"{url}/api/v1/diagnoses", content=LOG.read_bytes(), headers=headers, timeout=120).status_code

    with ThreadPoolExecutor(32) as pool:
        return Counter(pool.map(one, range(BURST)))


def job_runs(running: Cluster, first: int, last: int, period: int) -> dict[str, dict[str, Any]]:
    """Per periodic task: its periods in [first, last], its jobs there and how often each was started."""
    found: dict[str, dict[str, Any]] = {}
    rows = running.sql(
        "SELECT j.task_name, (j.args->>'timestamp')::bigint, j.status::text,"
        " (SELECT count(*) FROM procrastinate_events e WHERE e.job_id = j.id AND e.type = 'started')"
        " FROM procrastinate_jobs j WHERE (j.args->>'timestamp')::bigint BETWEEN :a AND :b",
        a=first,
        b=last,
    )
    for task, when, status, started in rows:
        entry = found.setdefault(str(task), {"jobs": Counter(), "statuses": Counter(), "started": Counter()})
        entry["jobs"][int(str(when))] += 1
        entry["statuses"][str(status)] += 1
        entry["started"][int(str(started))] += 1
    for task, every in (("tracelore.learn", period), ("tracelore.retry_stalled", 10)):
        entry = found.setdefault(task, {"jobs": Counter(), "statuses": Counter(), "started": Counter()})
        periods = range(first + (-first) % every, last + 1, every)
        entry["periods"] = len(periods)
        entry["runs_per_period"] = sorted(Counter(entry["jobs"][p] for p in periods).items())
    return {
        task: {
            "periods": e.get("periods"),
            "runs_per_period": e.get("runs_per_period"),
            "statuses": dict(e["statuses"]),
            "times_started": dict(e["started"]),
        }
        for task, e in found.items()
    }


def quota_exact(running: Cluster) -> tuple[int, int]:
    """(subjects, subjects whose counter equals their stored diagnoses) for today."""
    rows = running.sql(
        "SELECT q.subject, q.used, (SELECT count(*) FROM diagnoses d WHERE d.subject = q.subject"
        " AND d.created_at >= q.day) FROM quota_usage q WHERE q.day = (now() AT TIME ZONE 'UTC')::date"
    )
    return len(rows), sum(1 for _, used, stored in rows if used == stored)


def measure(args: argparse.Namespace, url: str, folder: Path) -> dict[str, Any]:
    with cluster(
        url,
        folder,
        instances=args.instances,
        workers=args.workers,
        learn_every=str(args.learn_every),
        quota_anonymous=str(ANONYMOUS),
        quota_pro="100000000",
        max_upload_bytes=str(1 << 20),
    ) as running:
        if running.proxy is None:
            raise SystemExit("caddy not found: apt-get install -y caddy")
        admin(running, "set-tier", "capacity@example.org", "pro")
        key = admin(running, "create-key", "capacity@example.org")
        wrk(running.url, key, 15, args.connections, folder)  # warm: engines compiled, pools filled
        servers = [i.proc.pid for i in running.instances]
        cpu0 = sum(tree_cpu_seconds(p) for p in servers)
        proxy0, pg0, db0, t0 = (
            tree_cpu_seconds(running.proxy.pid),
            postgres_cpu_seconds(),
            database_stats(url),
            time.time(),
        )
        burst: dict[str, Counter[int]] = {}
        with ThreadPoolExecutor(1) as side:
            later = side.submit(lambda: (time.sleep(args.minutes * 30), quota_burst(running.url))[1])
            load = wrk(running.url, key, args.minutes * 60, args.connections, folder)
            burst["statuses"] = later.result()
        t1 = time.time()
        cpu = sum(tree_cpu_seconds(p) for p in servers) - cpu0
        proxy_cpu, pg_cpu, db1 = (
            tree_cpu_seconds(running.proxy.pid) - proxy0,
            postgres_cpu_seconds() - pg0,
            database_stats(url),
        )
        time.sleep(args.learn_every + 10)  # the last period's jobs finish
        runs = job_runs(running, int(t0), int(t1) - args.learn_every, args.learn_every)
        subjects, exact = quota_exact(running)
        per_instance = [i.served() for i in running.instances]
    wall = t1 - t0
    done = load["ok"] + burst["statuses"].get(201, 0)
    diag_ms = diagnose_cpu_ms(LOG.read_bytes(), signatures=None)
    return {
        "setup": f"{args.instances} instances x {args.workers} workers, Caddy, one PostgreSQL; wrk -c {args.connections}",
        "cores": os.cpu_count(),
        "load_average_after": [round(x, 1) for x in os.getloadavg()],
        "seconds": round(wall, 1),
        "log_bytes": LOG.stat().st_size,
        "diagnoses": int(done),
        "diagnoses_per_second": round(done / wall, 1),
        "server_cpu_cores_used": round(cpu / wall, 2),
        "diagnoses_per_server_cpu_second": round(done / cpu, 1),
        "diagnoses_per_cpu_second_all_in": round(done / (cpu + proxy_cpu + pg_cpu), 1),
        "server_cpu_ms_per_diagnosis": round(cpu / done * 1000, 2),
        "in_process_diagnose_cpu_ms": round(diag_ms, 2),
        "proxy_cpu_ms_per_diagnosis": round(proxy_cpu / done * 1000, 2),
        "postgres_cpu_ms_per_diagnosis": round(pg_cpu / done * 1000, 2),
        "postgres_commits_per_diagnosis": round((db1["commits"] - db0["commits"]) / done, 2),
        "postgres_rows_written_per_diagnosis": round(
            sum(db1[k] - db0[k] for k in ("inserted", "updated", "deleted")) / done, 1
        ),
        "p50_ms": round(load["p50_us"] / 1000, 1),
        "p99_ms": round(load["p99_us"] / 1000, 1),
        "load_answers": {
            "201": int(load["ok"]),
            "503": int(load["s503"]),
            "429": int(load["s429"]),
            "other": int(load["other"]),
            "socket_errors": int(load["socket"]),
        },
        "served_per_instance": per_instance,
        "quota_burst": {str(k): v for k, v in sorted(burst["statuses"].items())},
        "quota_burst_exact": burst["statuses"] == Counter({201: ANONYMOUS, 429: BURST - ANONYMOUS}),
        "quota_counters_equal_stored": f"{exact} of {subjects} subjects",
        "job_runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=2, help="length of the load (the issue's run: 10)")
    parser.add_argument("--instances", type=int, default=2)
    parser.add_argument("--workers", type=int, default=2, help="uvicorn workers per instance")
    parser.add_argument("--connections", type=int, default=16, help="wrk connections through the proxy")
    parser.add_argument("--learn-every", type=int, default=10, help="period of the learning summary, seconds")
    parser.add_argument(
        "--server",
        default=os.environ.get("TRACELORE_TEST_DATABASE_URL") or "postgresql://postgres@127.0.0.1:5432/postgres",
        help="PostgreSQL server; a database is created on it for the run and dropped after",
    )
    args = parser.parse_args()
    if not shutil.which("wrk"):
        raise SystemExit("wrk not found: apt-get install -y wrk")
    server = make_url(args.server).set(drivername="postgresql+psycopg")
    name = f"tracelore_capacity_{secrets.token_hex(4)}"
    admin_engine = create_engine(server).execution_options(isolation_level="AUTOCOMMIT")
    with admin_engine.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    try:
        with tempfile.TemporaryDirectory() as scratch:
            result = measure(args, server.set(database=name).render_as_string(hide_password=False), Path(scratch))
    finally:
        with admin_engine.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin_engine.dispose()
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "capacity.json").write_text(json.dumps(result, indent=2))
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
