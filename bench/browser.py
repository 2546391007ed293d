"""The browser's evidence pass: a log picked on the home page, read by Chromium through Playwright.

    python bench/browser.py [--size 100M] [--repeat 3] [--out bench/out]

It starts `tracelore serve` (bench/api.py's throwaway server), opens the home page in
Debian's Chromium (`/usr/bin/chromium`, or TRACELORE_TEST_CHROMIUM), picks a generated
log (bench/loggen.py) and waits for the page to show what it kept. The page times its
own pass (from the first block read to the excerpt, `data-seconds`); the script reports
MB/s per run and the median, and checks that the page kept exactly the lines
`app.core.selection.selector.select_evidence` keeps.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.api import start_server, stop_server  # noqa: E402
from bench.loggen import generate, parse_size  # noqa: E402

CHROMIUM = os.environ.get("TRACELORE_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def browser_pass(log: Path, repeat: int) -> dict[str, Any]:
    """MB/s of the page's evidence pass over `log`, per run, and whether it kept what Python keeps."""
    from playwright.sync_api import sync_playwright

    from app.core.knowledge.loading import load_library
    from app.core.selection.rules import prefilter_spec
    from app.core.selection.selector import select_evidence

    scratch = Path(tempfile.mkdtemp(prefix="tracelore-bench-browser-"))
    server_args = argparse.Namespace(workers=1, connections=4, signatures=None)
    proc, url, _ = start_server(scratch, server_args)
    mb = log.stat().st_size / 1e6
    runs: list[float] = []
    kept: list[int] = []
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page()
            page.set_default_timeout(600_000)
            for _ in range(repeat):
                page.goto(url + "/")
                page.set_input_files("#file", str(log))
                summary = page.wait_for_selector("#excerpt-summary[data-kept]")
                assert summary is not None
                runs.append(mb / float(summary.get_attribute("data-seconds") or "nan"))
                kept.append(int(summary.get_attribute("data-kept") or "0"))
            browser.close()
    finally:
        stop_server(proc)
    with log.open("rb") as f:
        expected = select_evidence(
            iter(lambda: f.read(4 << 20), b""), prefilter_spec(load_library(ROOT / "signatures"))
        )
    return {"mb_s": runs, "median": statistics.median(runs), "same_count": all(k == len(expected.lines) for k in kept)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", default="100M")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    log = args.out / f"train-{args.size}.log"
    size = parse_size(args.size)
    if not log.exists() or abs(log.stat().st_size - size) > size // 100:
        generate(log, size)
    result = browser_pass(log, args.repeat)
    runs = ", ".join(f"{v:.0f}" for v in result["mb_s"])
    print(
        f"browser evidence pass, {args.size}: median {result['median']:.0f} MB/s (runs: {runs}); "
        f"kept lines {'equal' if result['same_count'] else 'DIFFER from'} Python's"
    )


if __name__ == "__main__":
    main()
