"""Match-dense logs: a log made of matching lines must cost about what a quiet one does.

Each log is the same size and made of one kind of line, repeated: `quiet` matches no
pattern of the library; the others match on every line (`nccl-version` is the line
every NCCL job prints at start-up, `oom`, `watchdog` and `crash-loop` are failures
printed over and over by a job that restarts or a rank that loops; `examples` is every
`examples.match` excerpt of the library, one after another: real failure lines of every
kind, so hundreds of patterns hit in every chunk). Each is diagnosed
in this process with the same library, best of `--repeat`, after one warm-up run (the
library compiles a pattern's engine when it first hits, and the Set builds its automaton's
states for text it has not seen): that first run's CPU time is shown apart, as what a
process pays once on top of what each log costs.

    .venv/bin/python bench/dense.py                    # 10M logs, the table
    .venv/bin/python bench/dense.py --check            # exit 1 when a checked log costs over 3x quiet
    .venv/bin/python bench/dense.py --only examples    # one kind (and quiet)
    .venv/bin/python bench/dense.py --instructions     # also instructions (valgrind's callgrind)

`--check` holds the kinds named by `--checked` (default: `nccl-version,watchdog`)
to `--max-ratio` (3) times the quiet log's CPU time; the other rows are shown, not held.
The ratio is held at 10 MB: what a dense log costs beyond a quiet one is bounded (each
pattern's first 4,096 lines per file), so at 1 MB that bound is a larger share.
CPU time (both scan threads) is the yardstick: on a shared machine wall time is noise.
With `--instructions` each log's second diagnosis (the first warms up) is also counted in
instructions under callgrind, in a process of its own: a figure no load on the machine moves.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from app.core.engine.diagnose import diagnose  # noqa: E402
from app.core.engine.matcher import matching_lines  # noqa: E402
from app.core.engine.reader import iter_chunks  # noqa: E402
from app.core.knowledge.loading import Library, load_library  # noqa: E402
from bench.loggen import failure_cascade, parse_size  # noqa: E402

LINES = {
    "quiet": "[rank3]: step 1234 | tokens/s 5321.2 | lr 3.0e-04 | mem 61.2 GiB | grad norm 0.913",
    "nccl-version": "NCCL version 2.21.5",
    "oom": "[rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 5 has a total "
    "capacity of 79.15 GiB of which 1.23 GiB is free. Including non-PyTorch memory, this process has 77.91 GiB "
    "memory in use. Of the allocated memory 74.10 GiB is allocated by PyTorch, and 2.31 GiB is reserved by "
    "PyTorch but unallocated.",
    "watchdog": "[rank1]:[E0614 11:20:01.123456 4001 ProcessGroupNCCL.cpp:607] [Rank 1] Watchdog caught "
    "collective operation timeout: WorkNCCL(SeqNum=48213, OpType=ALLREDUCE, NumelIn=262144, "
    "NumelOut=262144, Timeout(ms)=600000) ran for 600089 milliseconds before timing out.",
}


def library_examples(library: Library) -> bytes:
    """Every match example of the library, one after another: the failure lines it is built from."""
    logs = (ex.log.rstrip("\n") + "\n" for sig in library.signatures.values() for ex in sig.examples.match)
    return "".join(logs).encode()


def make_log(kind: str, size: int, library: Library | None = None) -> bytes:
    """About `size` bytes of one kind of line (whole lines)."""
    if kind == "examples":
        assert library is not None, "the examples log is made of a library's examples"
        unit = library_examples(library)
    else:
        unit = failure_cascade(32) if kind == "crash-loop" else LINES[kind].encode() + b"\n"
    return unit * max(1, size // len(unit))


def matched_share(library: Library, data: bytes) -> float:
    """The share of the log's lines some pattern matches."""
    total = data.count(b"\n")
    hit = sum(1 for _ in matching_lines(library, iter_chunks(data)))
    return hit / total


def measure(library: Library, data: bytes, repeat: int) -> tuple[float, float, float, str]:
    """CPU seconds of the first diagnosis, best CPU and wall seconds of the next ones, and what they found."""
    c0 = time.process_time()
    diagnosis = diagnose(data, library)  # warm-up: engines compile on first hit, the Set builds its states
    first = time.process_time() - c0
    cpu, wall = float("inf"), float("inf")
    for _ in range(repeat):
        t0, c0 = time.perf_counter(), time.process_time()
        diagnosis = diagnose(data, library)
        cpu = min(cpu, time.process_time() - c0)
        wall = min(wall, time.perf_counter() - t0)
    top = diagnosis.candidates[0] if diagnosis.candidates else None
    return first, cpu, wall, f"{top.id} ({top.count} lines)" if top else "nothing"


def _callgrind(state: str) -> None:
    subprocess.run(["callgrind_control", "-i", state, str(os.getpid())], check=True, capture_output=True)


def counted_run(library: Library, data: bytes) -> None:
    """One diagnosis after a warm-up one, counted: run under callgrind with --instr-atstart=no."""
    diagnose(data, library)
    _callgrind("on")
    diagnose(data, library)
    _callgrind("off")


def instructions(kind: str, args: argparse.Namespace) -> int:
    """Instructions of a diagnosis of a kind's log (both scan threads), in a process of its own."""
    command = ["valgrind", "--tool=callgrind", "--instr-atstart=no", "--callgrind-out-file=/dev/null"]
    command += [sys.executable, __file__, "--counted-run", kind, "--size", str(args.size)]
    command += ["--signatures", str(args.signatures)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    found = re.search(r"Collected : (\d+)", done.stderr)
    assert found is not None, done.stderr[-2000:]
    return int(found[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size", type=parse_size, default=parse_size("10M"))
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--signatures", type=Path, default=ROOT / "signatures")
    parser.add_argument("--checked", default="nccl-version,watchdog")
    parser.add_argument("--only", default="", help="comma list of kinds to run (quiet always runs first)")
    parser.add_argument("--max-ratio", type=float, default=3.0)
    parser.add_argument("--check", action="store_true", help="exit 1 when a checked kind exceeds --max-ratio")
    parser.add_argument("--instructions", action="store_true", help="also count instructions (valgrind)")
    parser.add_argument("--counted-run", default="", help=argparse.SUPPRESS)  # the process --instructions counts
    args = parser.parse_args()
    library = load_library(args.signatures)
    if args.counted_run:
        counted_run(library, make_log(args.counted_run, args.size, library))
        return
    checked = set(filter(None, args.checked.split(",")))
    kinds = ["quiet", *(k for k in LINES if k != "quiet"), "crash-loop", "examples"]
    only = set(filter(None, args.only.split(",")))
    unknown = (checked | only) - set(kinds)
    if unknown:
        parser.error(f"unknown kinds in --checked or --only: {', '.join(sorted(unknown))} (known: {', '.join(kinds)})")
    if only:
        kinds = [k for k in kinds if k == "quiet" or k in only]
    print(f"{args.size / 2**20:.0f} MiB per log, best of {args.repeat}\n")
    counts = " instructions | vs quiet |" if args.instructions else ""
    print(f"| log | lines matched | first CPU s | CPU s | wall s | CPU vs quiet |{counts} top candidate |")
    print(f"|---|---:|---:|---:|---:|---:|{'---:|---:|' if counts else ''}---|")
    base, base_count, failed = 0.0, 0, []
    for kind in kinds:
        data = make_log(kind, args.size, library)
        first, cpu, wall, top = measure(library, data, args.repeat)  # first: before anything else scans the log
        share = matched_share(library, data)
        if kind == "quiet" and share:
            sys.exit(f"the quiet log matches {share:.1%} of its lines: it must match none")
        base = base or cpu
        ratio = cpu / base
        held = kind in checked
        if held and ratio > args.max_ratio:
            failed.append(f"{kind}: {ratio:.1f}x quiet")
        mark = " (held)" if held else ""
        counted = ""
        if args.instructions:
            count = instructions(kind, args)
            base_count = base_count or count
            counted = f" {count / 1e6:,.0f} M | {count / base_count:.1f}x |"
        print(f"| {kind}{mark} | {share:.0%} | {first:.3f} | {cpu:.3f} | {wall:.3f} | {ratio:.1f}x |{counted} {top} |")
    if failed:
        print(f"\nover {args.max_ratio}x the quiet log: {'; '.join(failed)}")
        if args.check:
            sys.exit(1)


if __name__ == "__main__":
    main()
