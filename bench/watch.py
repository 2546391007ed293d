"""Memory and CPU of `tracelore watch` over a long run of a growing, rotating multi-rank job.

    python bench/watch.py [--minutes 10] [--rate 1M] [--files 4] [--rotate 16M] [--idle 20] [--check]

A writer (this process) appends realistic training-log noise (bench/loggen.py: rank
prefixes, tqdm redraws, NCCL INFO bursts, metric dicts, warnings, invalid UTF-8) to
--files per-rank files at --rate bytes per second, rotating each file away (rename to
`.1`, as logrotate does) every --rotate bytes. At the end the failure cascade lands (a
CUDA OOM on one rank, NCCL watchdog timeouts on the others, the launcher's summary).
Then the files stay quiet for --idle seconds (CPU measured after the first 2).
`tracelore watch FOLDER --format json` follows them as a separate process.

Every second the watch's resident memory (VmRSS) and CPU time are sampled from /proc. It
prints a row per minute, then: memory after the first minute, at its highest later, and
across the second half of the run, with its slope there (a least-squares line through the
samples: the scans' caps are full by then, 4 rotations of every file at the defaults, so a
slope is a leak, not a cap filling), CPU while writing and while idle, and how long after
the OOM line was written the report naming it came out. --check exits 1 when memory grew by
more than --max-growth MB after the first minute, the second half's slope is above
--max-slope MB a minute, idle CPU is above 2 %, or the report took more than 2 s.
--tracelore measures another build's command (e.g. a checkout of an earlier commit).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loggen import _noise, failure_cascade, parse_size  # noqa: E402

TICK = 0.1  # seconds between the writer's batches


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10)
    parser.add_argument("--rate", type=parse_size, default=parse_size("1M"), help="bytes written per second")
    parser.add_argument("--files", type=int, default=4, help="per-rank files")
    parser.add_argument(
        "--rotate", type=parse_size, default=parse_size("16M"), help="rotate a file after this many bytes"
    )
    parser.add_argument("--idle", type=float, default=20, help="quiet seconds at the end")
    parser.add_argument(
        "--max-growth", type=float, default=32, help="MB of growth after the first minute --check allows"
    )
    parser.add_argument(
        "--max-slope", type=float, default=0.25, help="MB a minute of RSS growth in the second half --check allows"
    )
    parser.add_argument(
        "--tracelore", default=None, help="the command to measure (default: the one beside this Python)"
    )
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()

    folder = Path(tempfile.mkdtemp(prefix="tracelore-watch-bench-"))
    out = folder.parent / f"{folder.name}.jsonl"
    tracelore = args.tracelore or str(Path(sys.executable).with_name("tracelore"))
    with out.open("wb") as sink:
        proc = subprocess.Popen(
            [tracelore, "watch", str(folder), "--format", "json"], stdout=sink, stderr=subprocess.DEVNULL
        )
        try:
            result = run(args, folder, out, proc.pid)
        finally:
            proc.terminate()
            proc.wait(60)
    for f in folder.iterdir():
        f.unlink()
    folder.rmdir()
    if os.environ.get("KEEP"):
        print(out)
    else:
        out.unlink()
    ok = (
        result["growth"] <= args.max_growth
        and result["slope"] is not None
        and result["slope"] <= args.max_slope
        and result["idle_cpu"] <= 2.0
        and result["latency"] is not None
        and result["latency"] <= 2.0
    )
    if args.check and not ok:
        print("CHECK FAILED")
        sys.exit(1)


def run(args: argparse.Namespace, folder: Path, out: Path, pid: int) -> dict[str, float | None]:
    rng = random.Random(7)
    ranks = args.files
    handles = {r: (folder / f"rank{r}.log").open("ab") for r in range(ranks)}
    sizes = dict.fromkeys(range(ranks), 0)
    duration = args.minutes * 60
    started = time.monotonic()
    cascade_at = started + duration - 2 * TICK  # the job's last lines
    cascade_written: float | None = None
    step, written, rotations = 0, 0, 0
    samples: list[tuple[float, float, float, int]] = []  # (elapsed, rss MB, cpu s, bytes written)
    next_sample = started
    reports = ReportReader(out)
    print(f"{'min':>5} {'MB written':>11} {'RSS MB':>7} {'CPU %':>6}")
    last_row = 0.0
    while (now := time.monotonic()) < started + duration:
        budget = int(args.rate * TICK)
        batch: dict[int, list[bytes]] = {r: [] for r in range(ranks)}
        while budget > 0:
            for piece in _noise(rng, ranks, step):
                batch[rng.randrange(ranks)].append(piece)
                budget -= len(piece)
            step += 1
        if cascade_written is None and now >= cascade_at:
            for line in failure_cascade(ranks, failing=ranks - 1).splitlines(keepends=True):
                batch[ranks - 1].append(line)
        for r, pieces in batch.items():
            data = b"".join(pieces)
            handles[r].write(data)
            handles[r].flush()
            sizes[r] += len(data)
            written += len(data)
            if sizes[r] >= args.rotate:  # logrotate: the file moves away, a new one takes its place
                handles[r].close()
                os.replace(folder / f"rank{r}.log", folder / f"rank{r}.log.1")
                handles[r] = (folder / f"rank{r}.log").open("ab")
                sizes[r] = 0
                rotations += 1
        if cascade_written is None and now >= cascade_at:
            cascade_written = time.time()
            break  # the job ended with it
        if now >= next_sample:
            samples.append((now - started, rss_mb(pid), cpu_seconds(pid), written))
            next_sample += 1.0
            if now - started - last_row >= 60 or len(samples) == 1:
                last_row = now - started
                print(f"{last_row / 60:5.1f} {written / 1e6:11.1f} {samples[-1][1]:7.1f} {cpu_pct(samples):6.1f}")
        reports.poll()
        time.sleep(max(0.0, TICK - (time.monotonic() - now)))
    for handle in handles.values():
        handle.close()
    for _ in range(int(2 / TICK)):  # the watch finishes what was just written
        reports.poll()
        time.sleep(TICK)
    end_writing = (time.monotonic() - started, rss_mb(pid), cpu_seconds(pid), written)
    for _ in range(int(args.idle / TICK)):
        reports.poll()
        time.sleep(TICK)
    idle_end = (time.monotonic() - started, rss_mb(pid), cpu_seconds(pid), written)
    samples += [end_writing, idle_end]
    latency = None if reports.seen is None or cascade_written is None else reports.seen - cascade_written
    after_first = [s[1] for s in samples if s[0] >= 60] or [samples[-1][1]]
    first_minute = after_first[0]
    writing_cpu = 100 * (end_writing[2] - samples[0][2]) / max(1e-9, end_writing[0] - samples[0][0])
    idle_cpu = 100 * (idle_end[2] - end_writing[2]) / max(1e-9, idle_end[0] - end_writing[0])
    print()
    print(f"written: {written / 1e6:,.1f} MB in {duration / 60:.1f} min to {ranks} files, {rotations} rotations")
    print(
        f"RSS: {first_minute:.1f} MB after the first minute, at most {max(after_first):.1f} MB later "
        f"(growth {max(after_first) - first_minute:.1f} MB)"
    )
    # Once the scans' caps are full (hits kept per pattern, rotated parts kept per file), memory
    # stops growing: the second half of the run shows it.
    half = [(s[0], s[1]) for s in samples if duration / 2 <= s[0] <= duration]
    slope = rss_slope(half)
    if half and slope is not None:
        rss = [m for _, m in half]
        print(
            f"RSS in the second half of the run: {min(rss):.1f} to {max(rss):.1f} MB, "
            f"slope {slope:+.3f} MB/min over {len(half)} samples"
        )
    print(f"CPU: {writing_cpu:.1f} % of a core while writing at {args.rate / 1e6:.1f} MB/s, {idle_cpu:.2f} % idle")
    print(f"report naming cuda.oom: {'never' if latency is None else f'{latency:.2f} s'} after its line was written")
    return {"growth": max(after_first) - first_minute, "slope": slope, "idle_cpu": idle_cpu, "latency": latency}


def rss_slope(samples: list[tuple[float, float]]) -> float | None:
    """MB a minute: the least-squares slope of (seconds, MB) samples."""
    slope = least_squares(samples)
    return None if slope is None else 60 * slope


def least_squares(points: list[tuple[float, float]]) -> float | None:
    """The slope of the least-squares line through (x, y) points; None with fewer than 2 x values."""
    if len({x for x, _ in points}) < 2:
        return None
    n = len(points)
    mean_x = sum(x for x, _ in points) / n
    mean_y = sum(y for _, y in points) / n
    cov = sum((x - mean_x) * (y - mean_y) for x, y in points)
    var = sum((x - mean_x) ** 2 for x, _ in points)
    return cov / var


def cpu_pct(samples: list[tuple[float, float, float, int]]) -> float:
    if len(samples) < 2:
        return 0.0
    window = [s for s in samples if s[0] >= samples[-1][0] - 60]
    a, b = window[0], samples[-1]
    return 100 * (b[2] - a[2]) / max(1e-9, b[0] - a[0])


class ReportReader:
    """Reads the watch's JSON reports as they are appended; notes when one first names cuda.oom."""

    def __init__(self, out: Path) -> None:
        self.out, self.pos = out, 0
        self.seen: float | None = None
        self.buffer = b""

    def poll(self) -> None:
        if self.seen is not None:
            return
        with self.out.open("rb") as f:
            f.seek(self.pos)
            data = f.read()
        self.pos += len(data)
        self.buffer += data
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            d = json.loads(line)
            if d["candidates"] and d["candidates"][0]["id"] == "cuda.oom":
                self.seen = time.time()
                return


if __name__ == "__main__":
    main()
