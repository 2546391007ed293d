"""What /metrics costs: CPU per counted request and per scrape, in memory and in multiprocess mode.

    python bench/metrics.py [--updates 200000] [--workers 4]

`prometheus-client` picks its mode when first imported, so each mode is measured in a
process of its own (this script run again with --child). A counted request is what
MetricsMiddleware does for each response (one labelled counter); a diagnosis adds a
histogram observation and the candidate counters. A scrape renders what `--workers`
processes counted (each writes its own files, as uvicorn's workers do). CPU time
(process_time), best of five: ratios matter, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

ROUTES = [f"/api/v1/route{i}" for i in range(20)]
CANDIDATES = [(f"sig.{i}", "initiating" if i % 3 else "collateral") for i in range(3)]


def _best(fn: Callable[[], object], repeat: int = 5) -> float:
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        fn()
        best = min(best, time.process_time() - start)
    return best


def child(updates: int, worker: bool) -> dict[str, float]:
    from app.web.metrics import Metrics

    metrics = Metrics()

    def count() -> None:
        for i in range(updates):
            metrics.request("GET", ROUTES[i % len(ROUTES)], 200)

    def diagnose() -> None:
        for i in range(updates // 10):
            metrics.add_in_flight(1)
            metrics.diagnosis(0.001 * (i % 100), CANDIDATES)
            metrics.add_in_flight(-1)

    result = {"request_us": _best(count) / updates * 1e6, "diagnosis_us": _best(diagnose) / (updates // 10) * 1e6}
    if not worker:
        result["scrape_ms"] = _best(lambda: metrics.render()) * 1e3
        result["scrape_bytes"] = len(metrics.render()[0])
    return result


def run(updates: int, env: dict[str, str], worker: bool) -> dict[str, float]:
    args = [sys.executable, __file__, "--child", "--updates", str(updates)] + (["--worker"] if worker else [])
    out = subprocess.run(args, env=env, check=True, capture_output=True, text=True).stdout
    return dict(json.loads(out))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--updates", type=int, default=200_000)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.updates, args.worker)))
        return
    env = {k: v for k, v in os.environ.items() if k != "PROMETHEUS_MULTIPROC_DIR"}
    memory = run(args.updates, env, worker=False)
    with tempfile.TemporaryDirectory(prefix="bench-metrics-") as directory:
        env["PROMETHEUS_MULTIPROC_DIR"] = directory
        for _ in range(args.workers - 1):  # the other workers' files, then the one that is scraped
            run(args.updates, env, worker=True)
        shared = run(args.updates, env, worker=False)
    print("| | in memory (one process) | multiprocess | ratio |")
    print("|---|---|---|---|")
    for key, label in (
        ("request_us", "counting one response (CPU us)"),
        ("diagnosis_us", "recording one diagnosis (CPU us)"),
        ("scrape_ms", f"one scrape (CPU ms; multiprocess: {args.workers} workers' files)"),
        ("scrape_bytes", "scrape size (bytes)"),
    ):
        print(f"| {label} | {memory[key]:.2f} | {shared[key]:.2f} | {shared[key] / memory[key]:.2f}x |")


if __name__ == "__main__":
    main()
