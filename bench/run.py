"""Throughput and peak memory of `tracelore diagnose` next to rg, grep and cat, on the same files.

    python bench/run.py [--sizes 100M,1G] [--pad 1000] [--repeat 3] [--out bench/out]
    python bench/run.py --waiting [--size 100M] [--repeat 5] [--no-browser] [--api]

For each log size and each library (10 real patterns, the shipped library, the
shipped library padded to --pad patterns) it times whole processes, best of
--repeat, alternating tools so that load on a shared machine hits all alike:

* `cat FILE > /dev/null`                     (reading the file)
* `rg --no-unicode -c -f PATTERNS FILE`      (the yardstick; never rg's Unicode mode)
* `LC_ALL=C grep -E -c -f PATTERNS.ere FILE` (patterns converted to ERE where possible)
* `tracelore diagnose FILE --format json`    (the real command, library load included)

It prints MB/s, the ratio to rg, peak RSS, and checks that the fast pass finds
exactly the lines rg finds.

`--waiting` measures instead, in one run, the places where a person waits (medians of
--repeat runs, next to the yardstick each is judged against):

* `tracelore diagnose` of a two-line log, whole process (parse cache warm);
* remote mode's evidence selection (`select_evidence`, as `diagnose --server` runs it)
  next to the in-process `diagnose()` of the same log: MB/s and their ratio;
* the browser's evidence pass in Chromium (bench/browser.py; `--no-browser` skips it);
* with `--api`, bench/api.py's table (a real server under load).
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loggen import generate, parse_size  # noqa: E402
from bench.padder import pad_library, small_library  # noqa: E402


def to_ere(pattern: str) -> str | None:
    """Best-effort conversion of an RE2 pattern to POSIX ERE for grep; None if it cannot be."""
    if "(?i)" in pattern or "(?s)" in pattern or "\\A" in pattern or "\\z" in pattern:
        return None
    out = re.sub(r"\(\?P<\w+>", "(", pattern).replace("(?:", "(")
    out = re.sub(r"(?<!\\)([*+?}])\?", r"\1", out)  # lazy quantifiers
    for a, b in (("\\d", "[0-9]"), ("\\s", "[[:space:]]"), ("\\w", "[[:alnum:]_]"), ("\\S", "[^[:space:]]")):
        out = out.replace(a, b)
    return None if "(?" in out else out


def rg_pattern(pattern: str) -> str:
    """The same pattern for rg --no-unicode: no group names, non-ASCII as UTF-8 byte escapes."""
    pattern = re.sub(r"[(][?]P<[A-Za-z_][A-Za-z0-9_]*>", "(?:", pattern)
    return "".join(c if ord(c) < 128 else "".join(f"\\x{b:02X}" for b in c.encode()) for c in pattern)


def installed_env(**extra: str) -> dict[str, str]:
    """This environment as an installed `tracelore` runs in: with its byte code written.

    pip writes a package's byte code when it installs it; a checkout gets it on its first
    run, unless PYTHONDONTWRITEBYTECODE is set, when every run compiles the sources again
    (about 80 ms of CPU), which no installed copy pays.
    """
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    return {**env, **extra}


def two_line_log(out: Path) -> Path:
    """The two-line log whose diagnosis times start-up."""
    tiny = out / "two-lines.log"
    tiny.write_text("starting\nRuntimeError: CUDA error: device-side assert triggered\n")
    return tiny


def timed(cmd: list[str] | str, *, shell: bool = False, env: dict[str, str] | None = None) -> tuple[float, int, str]:
    """Wall seconds, peak RSS in KiB and stdout of one whole process."""
    wrapped = ["/usr/bin/time", "-f", "%e %M", *(["bash", "-c", cmd] if shell else cmd)]
    started = time.perf_counter()
    proc = subprocess.run(wrapped, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - started
    last = proc.stderr.strip().splitlines()[-1].split()
    return wall, int(last[1]), proc.stdout


def lines_rg_finds(patterns: Path, log: Path) -> set[int]:
    out = subprocess.run(
        ["rg", "--no-unicode", "-n", "--no-filename", "-o", "-f", str(patterns), str(log)], capture_output=True
    )
    return {int(line.split(b":", 1)[0]) for line in out.stdout.split(b"\n") if line}


def lines_we_find(library_dir: Path, log: Path) -> set[int]:
    from app.core.engine.matcher import matching_lines
    from app.core.engine.reader import iter_chunks
    from app.core.knowledge.loading import load_library

    return set(matching_lines(load_library(library_dir), iter_chunks(log)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100M,1G")
    parser.add_argument("--pad", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "out")
    parser.add_argument("--check", action="store_true", help="also compare matched lines with rg (slow on 1G)")
    parser.add_argument("--waiting", action="store_true", help="measure where people wait instead (see above)")
    parser.add_argument("--size", default="100M", help="the log for --waiting")
    parser.add_argument("--no-browser", action="store_true", help="with --waiting: skip the Chromium row")
    parser.add_argument("--api", action="store_true", help="with --waiting: also run bench/api.py")
    args = parser.parse_args()
    if args.waiting:
        waiting(args)
        return
    if not shutil.which("rg"):
        sys.exit("ripgrep is needed: apt-get install ripgrep")
    args.out.mkdir(parents=True, exist_ok=True)
    tracelore = str(Path(sys.executable).with_name("tracelore"))
    # Once before timing: byte code written, as an installed copy has it.
    tiny = two_line_log(args.out)
    subprocess.run([tracelore, "diagnose", str(tiny), "--fail-on", "never"], capture_output=True, env=installed_env())

    from app.core.knowledge.loading import load_library

    shipped = ROOT / "signatures"
    libraries = {
        "10": (args.out / "lib10", lambda p: small_library(shipped, p, 10)),
        "shipped": (shipped, None),
        str(args.pad): (args.out / f"lib{args.pad}", lambda p: pad_library(shipped, p, args.pad)),
    }
    rows = []
    for size_text in args.sizes.split(","):
        size = parse_size(size_text)
        log = args.out / f"train-{size_text}.log"
        if not log.exists() or abs(log.stat().st_size - size) > size // 100:
            print(f"generating {log} ...", file=sys.stderr)
            generate(log, size)
        mb = log.stat().st_size / 1e6
        for label, (lib_dir, make) in libraries.items():
            if make is not None and not lib_dir.exists():
                make(lib_dir)
            library = load_library(lib_dir)
            patterns = args.out / f"patterns-{label}.txt"
            # rg joins the patterns into one alternation: names must go (duplicates are an
            # error) and each pattern is grouped so a leading (?i) stays its own.
            patterns.write_text("".join(f"(?:{rg_pattern(p)})\n" for p in library.regexes))
            ere = [e for e in (to_ere(p) for p in library.regexes) if e]
            ere_file = args.out / f"patterns-{label}.ere"
            ere_file.write_text("\n".join(ere) + "\n")
            tools = {
                "cat": (f"cat {log} > /dev/null", True, None),
                "rg --no-unicode": (["rg", "--no-unicode", "-c", "-f", str(patterns), str(log)], False, None),
                f"grep -E, C locale ({len(ere)} patterns)": (
                    ["grep", "-E", "-c", "-f", str(ere_file), str(log)],
                    False,
                    {**os.environ, "LC_ALL": "C"},
                ),
                "tracelore diagnose": (
                    [
                        tracelore,
                        "diagnose",
                        str(log),
                        "--format",
                        "json",
                        "--fail-on",
                        "never",
                        "--signatures",
                        str(lib_dir),
                    ],
                    False,
                    installed_env(),
                ),
            }
            best: dict[str, tuple[float, int]] = {}
            for _ in range(args.repeat):
                for name, (cmd, shell, env) in tools.items():
                    wall, rss, _ = timed(cmd, shell=shell, env=env)
                    prior = best.get(name)
                    best[name] = (min(wall, prior[0]) if prior else wall, max(rss, prior[1]) if prior else rss)
            rg_wall = best["rg --no-unicode"][0]
            for name, (wall, rss) in best.items():
                rows.append(
                    (size_text, f"{label} ({len(library.regexes)})", name, mb / wall, rg_wall / wall, rss / 1024)
                )
            if args.check:
                ours, theirs = lines_we_find(lib_dir, log), lines_rg_finds(patterns, log)
                status = (
                    "same lines"
                    if ours == theirs
                    else f"DIFFER: {len(ours - theirs)} extra, {len(theirs - ours)} missing"
                )
                print(f"{size_text} {label}: {len(ours)} matching lines, {status}", file=sys.stderr)

    print("| log | library (patterns) | tool | MB/s | x rg | peak RSS MB |")
    print("|---|---|---|---:|---:|---:|")
    for size_text, lib, name, mbs, ratio, rss in rows:
        print(f"| {size_text} | {lib} | {name} | {mbs:,.0f} | {ratio:.2f} | {rss:,.0f} |")
    print()
    startup_table(tracelore, {label: lib_dir for label, (lib_dir, _) in libraries.items()}, args.repeat, args.out)


def startup_table(tracelore: str, libraries: dict[str, Path], repeat: int, out: Path) -> None:
    """Library load and compile in-process, and a whole `tracelore diagnose` of a two-line log.

    "cold" parses the YAML (an empty cache directory), "warm" reads the parse cache a
    previous start left; the Set is compiled on every start either way.
    """
    tiny = two_line_log(out)
    print(
        "| library (patterns) | load + compile, cold | warm | of which the Set | `tracelore diagnose` 2 lines, warm |"
    )
    print("|---|---:|---:|---:|---:|")
    for label, lib_dir in libraries.items():
        probe = (
            "import sys, time, tempfile, pathlib\n"
            "from app.core.knowledge.loading import load_library\n"
            "cache = pathlib.Path(tempfile.mkdtemp())\n"
            "times = []\n"
            "for _ in range(2):\n"
            "    t = time.perf_counter(); lib = load_library(pathlib.Path(sys.argv[1]), cache=cache)\n"
            "    times.append(time.perf_counter() - t)\n"
            "import re2\n"
            "from app.core.knowledge.engines import SCAN as _SCAN\nfrom app.core.patterns.rewrites import relaxed\n"
            "t = time.perf_counter(); s = re2.Set.SearchSet(_SCAN)\n"
            "for p in lib.regexes: s.Add(('(?m)' + relaxed(p)).encode())\n"
            "s.Compile(); print(len(lib.regexes), *times, time.perf_counter() - t)\n"
        )
        best: list[float] | None = None
        for _ in range(repeat):
            got = subprocess.run(
                [sys.executable, "-c", probe, str(lib_dir)], capture_output=True, text=True, cwd=ROOT, check=True
            ).stdout.split()
            values = [float(v) for v in got[1:]]
            best = values if best is None else [min(a, b) for a, b in zip(best, values, strict=True)]
        assert best is not None
        env = installed_env(TRACELORE_CACHE_DIR=str(out / "cache"))
        command = [tracelore, "diagnose", str(tiny), "--fail-on", "never", "--signatures", str(lib_dir)]
        subprocess.run(command, capture_output=True, env=env)  # fills the cache
        whole = min(timed(command, env=env)[0] for _ in range(repeat))
        cold, warm, set_compile = best
        print(f"| {label} ({got[0]}) | {cold:.2f} s | {warm:.2f} s | {set_compile:.2f} s | {whole:.2f} s |")


def median_runs(fn: Callable[[], object], repeat: int) -> list[float]:
    """Wall seconds of each of `repeat` calls."""
    runs = []
    for _ in range(repeat):
        started = time.perf_counter()
        fn()
        runs.append(time.perf_counter() - started)
    return runs


def waiting(args: argparse.Namespace) -> None:
    """Where people wait: start-up, remote mode's selection, the browser's pass, the API (medians)."""
    import statistics

    from app.cli.context import scan_threads
    from app.core.engine.diagnose import diagnose
    from app.core.knowledge.loading import load_library
    from app.core.selection.rules import prefilter_spec
    from app.core.selection.selector import select_evidence

    args.out.mkdir(parents=True, exist_ok=True)
    tracelore = str(Path(sys.executable).with_name("tracelore"))
    rows: list[tuple[str, str, str]] = []

    tiny = two_line_log(args.out)
    env = installed_env(TRACELORE_CACHE_DIR=str(args.out / "cache"))
    command = [tracelore, "diagnose", str(tiny), "--fail-on", "never"]
    subprocess.run(command, capture_output=True, env=env, check=True)  # fills the parse cache, writes byte code
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(args.repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        walls.append(timed(command, env=env)[0])
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime)
    rows.append(
        (
            "`tracelore diagnose` of a two-line log, whole process",
            f"{statistics.median(walls):.2f} s",
            f"CPU {statistics.median(cpus):.2f} s; wall runs " + ", ".join(f"{v:.2f}" for v in walls),
        )
    )

    size = parse_size(args.size)
    log = args.out / f"train-{args.size}.log"
    if not log.exists() or abs(log.stat().st_size - size) > size // 100:
        generate(log, size)
    mb = log.stat().st_size / 1e6
    library = load_library(ROOT / "signatures")
    spec = prefilter_spec(library)

    def select() -> object:
        with log.open("rb") as f:
            return select_evidence(iter(lambda: f.read(4 << 20), b""), spec, threads=scan_threads())

    def own_cpu() -> float:
        used = resource.getrusage(resource.RUSAGE_SELF)  # every thread of this process
        return used.ru_utime + used.ru_stime

    selects: list[float] = []
    diagnoses: list[float] = []
    select_cpu: list[float] = []
    diagnose_cpu: list[float] = []
    for _ in range(args.repeat):  # alternated: load on a shared machine hits both alike
        before = own_cpu()
        selects += median_runs(select, 1)
        between = own_cpu()
        diagnoses += median_runs(lambda: diagnose(log, library), 1)
        select_cpu.append(between - before)
        diagnose_cpu.append(own_cpu() - between)
    ratios = [d / s for s, d in zip(selects, diagnoses, strict=True)]
    rows.append(
        (
            f"remote mode: evidence selected from a {args.size} log",
            f"{mb / statistics.median(selects):.0f} MB/s",
            f"x{statistics.median(ratios):.2f} of `diagnose()` on the same log "
            f"({mb / statistics.median(diagnoses):.0f} MB/s); CPU time {statistics.median(select_cpu):.2f} s "
            f"({statistics.median(diagnose_cpu):.2f} s for `diagnose()`); runs "
            + ", ".join(f"{mb / v:.0f}" for v in selects),
        )
    )

    if not args.no_browser:
        from bench.browser import browser_pass

        browser = browser_pass(log, args.repeat)
        rows.append(
            (
                f"browser: evidence picked from a {args.size} file (Chromium)",
                f"{browser['median']:.0f} MB/s",
                f"x{browser['median'] / (mb / statistics.median(selects)):.2f} of remote mode; runs "
                + ", ".join(f"{v:.0f}" for v in browser["mb_s"])
                + ("" if browser["same_count"] else "; KEPT LINES DIFFER"),
            )
        )

    print("| where | median | notes |")
    print("|---|---:|---|")
    for where, value, notes in rows:
        print(f"| {where} | {value} | {notes} |")
    if args.api:
        print()
        subprocess.run([sys.executable, str(ROOT / "bench" / "api.py"), "--duration", "10"], check=False)


if __name__ == "__main__":
    main()
