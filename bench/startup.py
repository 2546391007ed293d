"""Start-up of `tracelore diagnose`: a two-line log, the whole process, the parse cache warm.

    python bench/startup.py [--before REV] [--repeat 15] [--instructions]

Runs `python -m app diagnose` of a two-line log in this checkout and, with --before, in
the tree of an earlier commit (extracted with `git archive`; same interpreter, same
packages), alternately, and prints the median CPU and wall time of each and their ratio.
CPU time is the steadier figure on a shared machine. Byte code is written and the parse
cache filled by a first run of each, as on a user's machine after the first command.

With --instructions it also counts the instructions of one run in each tree under
valgrind's callgrind: a ratio no load on the machine moves.

Then it times the stages of the same command in one process (CPU): what is left of the
start-up and where.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LOG = "starting\nRuntimeError: CUDA error: device-side assert triggered\n"

# The stages of `tracelore diagnose LOG` in one process, each timed after the ones before it.
STAGES = """
import sys, time
clock = time.process_time
start = clock()
marks = []
def stage(name, code):
    global start
    exec(code, globals())
    now = clock()
    marks.append(f"{name} {1000 * (now - start):.0f}")
    start = now
stage("click and the command group", "import click, app.cli; app.cli.without_pydantic_plugins()")
stage("pydantic (first model built)", "from pydantic import BaseModel\\nclass _Probe(BaseModel):\\n    a: int = 0")
stage("re2", "import re2")
stage("the core (models, engine)", "import app.core")
stage("the diagnose command, Settings", "import app.cli.diagnose, app.config; s = app.config.Settings()")
stage("library, warm cache", "from app.core.knowledge.loading import load_library; lib = load_library(s.signatures_dir, cache=s.cache_dir)")
stage("diagnose and render", "from app.core import diagnose; from app.core.rendering.registry import render_report; "
      "from pathlib import Path; render_report(diagnose(Path(sys.argv[1]), lib), 'text')")
print("; ".join(marks))
"""


def run_once(tree: Path, log: Path, env: dict[str, str]) -> tuple[float, float]:
    """CPU and wall seconds of one whole `python -m app diagnose LOG` in `tree`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "app", "diagnose", str(log), "--fail-on", "never"],
        cwd=tree,
        env=env,
        capture_output=True,
        check=True,
    )
    wall = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, wall


def instructions(tree: Path, log: Path, env: dict[str, str]) -> int:
    """Instructions one whole `python -m app diagnose LOG` in `tree` executes (callgrind's count)."""
    run = subprocess.run(
        ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, "-m", "app"]
        + ["diagnose", str(log), "--fail-on", "never"],
        cwd=tree,
        env={**env, "PYTHONHASHSEED": "0"},  # a random seed moves the count by up to 2%
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", run.stderr)
    assert found, run.stderr[-500:]
    return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--before", default=None, help="A commit to compare with (e.g. main).")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--instructions", action="store_true", help="Also count instructions (valgrind).")
    args = parser.parse_args()

    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / "two-lines.log"
    log.write_text(LOG)
    # As users run it: byte code cached; the parse cache in its own folder.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["TRACELORE_CACHE_DIR"] = str(args.out / "cache")
    trees = {"this checkout": ROOT}
    with tempfile.TemporaryDirectory(dir=args.out) as scratch:
        if args.before:
            old = Path(scratch) / "before"
            old.mkdir()
            archive = subprocess.run(["git", "archive", args.before], cwd=ROOT, capture_output=True, check=True)
            subprocess.run(["tar", "-x", "-C", str(old)], input=archive.stdout, check=True)
            trees = {f"before ({args.before})": old, **trees}
        for tree in trees.values():
            run_once(tree, log, env)  # writes byte code, fills the parse cache
        runs: dict[str, list[tuple[float, float]]] = {name: [] for name in trees}
        for _ in range(args.repeat):  # alternated: load on a shared machine hits both alike
            for name, tree in trees.items():
                runs[name].append(run_once(tree, log, env))
        counted = {name: instructions(tree, log, env) for name, tree in trees.items()} if args.instructions else {}

    print(f"`tracelore diagnose` of a two-line log, whole process, parse cache warm (medians of {args.repeat})")
    print()
    print("| tree | CPU | wall |")
    print("|---|---:|---:|")
    cpu = {}
    for name, values in runs.items():
        cpu[name] = statistics.median(c for c, _ in values)
        print(f"| {name} | {cpu[name]:.3f} s | {statistics.median(w for _, w in values):.3f} s |")
    if args.before:
        first, last = cpu.values()
        print(f"\nCPU after / before: {last / first:.2f}")
    for name, count in counted.items():
        print(f"Instructions, {name}: {count / 1e6:,.0f} M")
    if args.before and counted:
        first_count, last_count = counted.values()
        print(f"Instructions after / before: {last_count / first_count:.2f}")
    stages = subprocess.run(
        [sys.executable, "-c", STAGES, str(log)], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    print(f"\nStages in one process, CPU ms: {stages.stdout.strip()}")


if __name__ == "__main__":
    main()
