"""The browser's evidence pass: a log picked on the home page, read by Chromium through Playwright.

    python bench/browser.py [--size 100M] [--repeat 3] [--before REF] [--pick-after 1] [--out bench/out]
    python bench/browser.py --worker [--size 100M] [--repeat 5] [--before REF]

It starts `tracelore serve` (bench/api.py's throwaway server), opens the home page in
Debian's Chromium (`/usr/bin/chromium`, or TRACELORE_TEST_CHROMIUM), picks a generated
log (bench/loggen.py) as a person does (the pointer on the picker, the file picked
--pick-after seconds later: the page makes its workers ready meanwhile; 0 picks at once)
and waits for the page to show what it kept. The page times its
own pass (from the first block read to the excerpt, `data-seconds`); the script reports
MB/s per run and the median, the CPU time Chromium's page processes spent per run (the
page and its workers, read from /proc: steadier than the wall time on a loaded machine),
and checks that the page kept exactly the lines `app.core.selection.selector.select_evidence`
keeps. With `--before REF`, the page's scripts of that commit (`git show`) and the rules
and patterns it publishes (its `prefilter_spec`, run in its tree extracted with `git
archive`) are served in alternate rounds, the same page and server otherwise, and both are
reported.

`--worker` runs the page's screening worker alone in Node (bench/excerpt_worker.js: two
workers, blocks and caps as the page hands them out) and reports its CPU time, per run and
the median, alternately with REF's worker if given, and whether their answers are equal.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from playwright.sync_api import Route

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api import start_server, stop_server  # noqa: E402
from bench.loggen import generate, parse_size  # noqa: E402

CHROMIUM = os.environ.get("TRACELORE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SCRIPTS = ("excerpt.js", "excerpt-worker.js")


def renderer_cpu() -> float:
    """CPU seconds used so far by Chromium's page processes (their workers are threads of them)."""
    total = 0
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            if b"--type=renderer" not in Path(f"/proc/{pid}/cmdline").read_bytes():
                continue
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        total += int(fields[11]) + int(fields[12])  # utime, stime
    return total / os.sysconf("SC_CLK_TCK")


def scripts_of(ref: str) -> dict[str, bytes]:
    """The page's scripts as they are in commit `ref`."""
    return {
        name: subprocess.run(
            ["git", "show", f"{ref}:app/web/static/{name}"], cwd=ROOT, capture_output=True, check=True
        ).stdout
        for name in SCRIPTS
    }


def spec_of(ref: str) -> bytes:
    """The rules and patterns commit `ref` publishes for this library (its code, these signatures)."""
    with tempfile.TemporaryDirectory(prefix="tracelore-bench-spec-") as tree:
        archive = subprocess.run(["git", "archive", ref, "app"], cwd=ROOT, capture_output=True, check=True)
        subprocess.run(["tar", "-x", "-C", tree], input=archive.stdout, check=True)
        code = (
            "import json, sys; from pathlib import Path; from app.core.knowledge.loading import load_library;"
            " from app.core.selection.rules import prefilter_spec;"
            " sys.stdout.write(json.dumps(prefilter_spec(load_library(Path(sys.argv[1])))))"
        )
        env = {**os.environ, "PYTHONPATH": tree}
        return subprocess.run(
            [sys.executable, "-c", code, str(ROOT / "signatures")], cwd=tree, env=env, capture_output=True, check=True
        ).stdout


def serving(scripts: dict[str, bytes], served: list[str]) -> Callable[[Route], None]:
    """A route handler that answers the page's script requests with `scripts`, noting each in `served`."""

    def serve(route: Route) -> None:
        name = route.request.url.split("?", 1)[0].rsplit("/", 1)[1]
        served.append(name)
        route.fulfill(body=scripts[name], content_type="text/javascript")

    return serve


def browser_pass(log: Path, repeat: int, before: str | None = None, pick_after: float = 1.0) -> dict[str, Any]:
    """MB/s and CPU of the page's evidence pass over `log`, per run, and whether it kept what Python keeps.

    As a person does, the pointer goes to the file picker first and the file is picked
    `pick_after` seconds later (0: at once, so nothing is made ready ahead of the pick). The
    CPU figure counts from before the pointer moved, so work done ahead of the pick is in it.
    With `before`, rounds alternate between that commit's scripts and these; the figures of
    the former are under "before"."""
    from playwright.sync_api import sync_playwright

    from app.core.knowledge.loading import load_library
    from app.core.selection.rules import prefilter_spec
    from app.core.selection.selector import select_evidence

    old = scripts_of(before) if before else None
    old_spec = spec_of(before) if before else b""
    scratch = Path(tempfile.mkdtemp(prefix="tracelore-bench-browser-"))
    server_args = argparse.Namespace(workers=1, connections=4, signatures=None)
    proc, url, _ = start_server(scratch, server_args)
    mb = log.stat().st_size / 1e6
    results: dict[str, dict[str, list[float]]] = {
        side: {"mb_s": [], "cpu": [], "kept": []} for side in (["before", "after"] if old else ["after"])
    }
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            for _ in range(repeat):
                for side, runs in results.items():
                    context = browser.new_context()
                    served: list[str] = []
                    if side == "before" and old is not None:
                        for name in SCRIPTS:
                            context.route(f"**/static/{name}*", serving(old, served))
                        context.route(
                            "**/api/v1/signatures/prefilter.json*",
                            lambda route: route.fulfill(body=old_spec, content_type="application/json"),
                        )
                    page = context.new_page()
                    page.set_default_timeout(600_000)
                    page.goto(url + "/")
                    cpu = renderer_cpu()
                    if pick_after > 0:
                        page.hover("label[for=file]")
                        page.wait_for_timeout(pick_after * 1000)
                    page.set_input_files("#file", str(log))
                    summary = page.wait_for_selector("#excerpt-summary[data-kept]")
                    assert summary is not None
                    runs["cpu"].append(renderer_cpu() - cpu)
                    runs["mb_s"].append(mb / float(summary.get_attribute("data-seconds") or "nan"))
                    runs["kept"].append(int(summary.get_attribute("data-kept") or "0"))
                    if side == "before":
                        assert set(served) == set(SCRIPTS), f"the earlier scripts were not all served: {served}"
                    context.close()
            browser.close()
    finally:
        stop_server(proc)
    with log.open("rb") as f:
        expected = select_evidence(
            iter(lambda: f.read(4 << 20), b""), prefilter_spec(load_library(ROOT / "signatures"))
        )
    out: dict[str, Any] = {}
    for side, runs in results.items():
        figures = {
            "mb_s": runs["mb_s"],
            "median": statistics.median(runs["mb_s"]),
            "cpu": runs["cpu"],
            "cpu_median": statistics.median(runs["cpu"]),
            "same_count": all(k == len(expected.lines) for k in runs["kept"]),
        }
        if side == "after":
            out.update(figures)
        else:
            out["before"] = figures
    return out


def worker_pass(log: Path, repeat: int, before: str | None = None) -> dict[str, dict[str, Any]]:
    """CPU seconds of the screening worker over `log` in Node, per run, this tree's and `before`'s."""
    from app.core.knowledge.loading import load_library
    from app.core.selection.rules import prefilter_spec

    scratch = Path(tempfile.mkdtemp(prefix="tracelore-bench-worker-"))
    spec = scratch / "spec.json"
    spec.write_text(json.dumps(prefilter_spec(load_library(ROOT / "signatures"))))
    workers = {"after": ROOT / "app" / "web" / "static" / "excerpt-worker.js"}
    if before:
        workers = {"before": scratch / "before.js", **workers}
        workers["before"].write_bytes(scripts_of(before)["excerpt-worker.js"])
    runs: dict[str, dict[str, Any]] = {side: {"cpu": [], "digests": set()} for side in workers}
    for _ in range(repeat):
        for side, script in workers.items():
            out = subprocess.run(
                ["node", str(ROOT / "bench" / "excerpt_worker.js"), str(script), str(spec), str(log)],
                capture_output=True,
                check=True,
                text=True,
            )
            answer = json.loads(out.stdout)
            runs[side]["cpu"].append(answer["cpu"])
            runs[side]["digests"].add(answer["digest"])
    return runs


def describe(figures: dict[str, Any], mb: float) -> str:
    runs = ", ".join(f"{v:.0f}" for v in figures["mb_s"])
    cpus = ", ".join(f"{v:.2f}" for v in figures["cpu"])
    return (
        f"median {figures['median']:.0f} MB/s (runs: {runs}); Chromium CPU median {figures['cpu_median']:.2f} s "
        f"({mb / figures['cpu_median']:.0f} MB per CPU second; runs: {cpus}); "
        f"kept lines {'equal' if figures['same_count'] else 'DIFFER from'} Python's"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="100M")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--before", help="a commit whose page scripts run in alternate rounds")
    parser.add_argument("--worker", action="store_true", help="the screening worker alone, in Node")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument(
        "--pick-after",
        type=float,
        default=1.0,
        help="seconds between pointing at the file picker and the pick (0: the file is picked at once)",
    )
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"train-{args.size}.log"
    size = parse_size(args.size)
    if not log.exists() or abs(log.stat().st_size - size) > size // 100:
        generate(log, size)
    mb = log.stat().st_size / 1e6
    if args.worker:
        runs = worker_pass(log, args.repeat, args.before)
        load = os.getloadavg()
        print(f"load average {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}")
        for side, r in runs.items():
            median = statistics.median(r["cpu"])
            cpus = ", ".join(f"{v:.2f}" for v in r["cpu"])
            label = f"before ({args.before})" if side == "before" else "this tree"
            print(
                f"screening worker in Node, {args.size}, {label}: CPU median {median:.2f} s ({mb / median:.0f} MB/s; runs: {cpus})"
            )
        if "before" in runs:
            ratio = statistics.median(runs["after"]["cpu"]) / statistics.median(runs["before"]["cpu"])
            same = runs["before"]["digests"] == runs["after"]["digests"] and len(runs["after"]["digests"]) == 1
            print(f"after/before CPU: {ratio:.2f}x; answers {'equal' if same else 'DIFFER'}")
        return
    result = browser_pass(log, args.repeat, args.before, args.pick_after)
    load = os.getloadavg()
    print(f"load average {load[0]:.1f}, {load[1]:.1f}, {load[2]:.1f}")
    if "before" in result:
        print(f"browser evidence pass, {args.size}, before ({args.before}): {describe(result['before'], mb)}")
    print(f"browser evidence pass, {args.size}: {describe(result, mb)}")
    if "before" in result:
        print(
            f"after/before: {result['median'] / result['before']['median']:.2f}x MB/s, "
            f"{result['before']['cpu_median'] / result['cpu_median']:.2f}x less CPU"
        )


if __name__ == "__main__":
    main()
