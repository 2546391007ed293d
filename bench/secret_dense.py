"""Logs dense in secret-like tokens must cost about what an ordinary log does, whole logs kept or not.

Each dense log is about 10 MB of lines made of one shape the redactor knows, a value on every line,
each value different (random, as real secrets are): for every redaction rule, its own first
example line with the secret's letters and digits replaced at random; plus the two logs of issue #38
(`10.1.2.3 10.1.0.9` and AKIA keys, one line repeated) and logs with an address every 64, 128 and
256 bytes among training-log lines (a density just under, at and over what a kept log may take).
The yardstick is bench/loggen.py's 10 MB training log. Each is kept as the service keeps an upload
(`app.core.keep.keep`: checked, hashed, diagnosed, windows cut and redacted, and with
`TRACELORE_STORE_LOG` the whole log redacted and compressed), in this process, best of `--repeat`
after a warm-up; CPU time is the measure (wall time on a shared machine is noise).

    .venv/bin/python bench/secret_dense.py                  # the table
    .venv/bin/python bench/secret_dense.py --check          # exit 1 when a log costs over 3x the ordinary one
    .venv/bin/python bench/secret_dense.py --only ipv4,aws  # rows whose name holds one of these

A log over the redaction budget (app/core/keep.py) is diagnosed and its windows kept, but it is not
kept whole: the `kept` column says which.
"""

from __future__ import annotations

import argparse
import io
import random
import string
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(ROOT))

from app.core.keep import keep  # noqa: E402
from app.core.knowledge.loading import Library, load_library  # noqa: E402
from app.core.redaction.redactor import all_rules  # noqa: E402
from bench.loggen import generate  # noqa: E402

SIZE = 10_000_000
HEX = set("0123456789abcdef")


def _randomised(line: str, secret: str, rng: random.Random) -> str:
    """The line with the secret's letters and digits drawn anew, each keeping its kind (and hex staying hex)."""
    body = secret[4:]  # a vendor prefix (AKIA, ghp_, SG.) stays
    hexy = all(c in HEX for c in body.lower() if c.isalnum())
    out = []
    for ch in body:
        if ch.isdigit():
            out.append(rng.choice(string.digits))
        elif ch.isalpha() and hexy:
            out.append(rng.choice("abcdef" if ch.islower() else "ABCDEF"))
        elif ch.isalpha():
            out.append(rng.choice(string.ascii_lowercase if ch.islower() else string.ascii_uppercase))
        else:
            out.append(ch)
    return line.replace(secret, secret[:4] + "".join(out))


def shape_logs() -> dict[str, Callable[[], bytes]]:
    """Each dense log, by name, made on demand."""
    logs: dict[str, Callable[[], bytes]] = {}
    for index, rule in enumerate(all_rules()):
        example = rule.positive[0]
        found = rule.regex.search(example)
        if found is None or not found.group(rule.group):
            continue
        secret = found.group(rule.group)

        def make(example: str = example, secret: str = secret, seed: int = index) -> bytes:
            rng = random.Random(seed)
            lines, size = [], 0
            while size < SIZE:
                line = _randomised(example, secret, rng) if len(secret) > 4 else example
                lines.append(line)
                size += len(line) + 1
            return ("\n".join(lines) + "\n").encode()

        logs[f"{rule.type} #{index}"] = make

    def repeated(line: str) -> Callable[[], bytes]:
        return lambda: (line + "\n").encode() * (SIZE // (len(line) + 1))

    logs["issue: '10.1.2.3 10.1.0.9' repeated"] = repeated("10.1.2.3 10.1.0.9")
    logs["issue: AKIA keys repeated"] = repeated("AKIAZ7Q4R2VXYLM3NP5K AKIAZ7Q4R2VXYLM3NP5Q")
    for every in (64, 128, 256):
        logs[f"an address every {every} bytes"] = lambda every=every: _spaced(every)
    return logs


def _spaced(every: int) -> bytes:
    """Training-log lines with a distinct IPv4 address every `every` bytes."""
    rng = random.Random(every)
    filler = "[rank3]: step 1234 | loss 0.913 | lr 3.0e-04 | tokens/s 5321.2 | mem 61.2 GiB | grad norm 0.9131"
    lines, size = [], 0
    while size < SIZE:
        ip = f"10.{rng.randrange(256)}.{rng.randrange(256)}.{rng.randrange(1, 255)}"
        pad = max(0, every - len(ip) - 12)
        line = f"peer {ip} {filler[:pad]}"
        lines.append(line)
        size += len(line) + 1
    return ("\n".join(lines) + "\n").encode()


def cpu(data: bytes, library: Library, *, keep_log: bool, repeat: int) -> tuple[float, bool]:
    """Best CPU seconds of keeping a log (after a warm-up run), and whether the whole log was kept."""
    kept = False
    best = float("inf")
    for run in range(repeat + 1):
        started = time.process_time()
        record = keep([("train.log", io.BytesIO(data))], library, top=None, context=5, keep_log=keep_log)
        took = time.process_time() - started
        kept = record.log_gz is not None
        if run:
            best = min(best, took)
    return best, kept


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--check", action="store_true", help="exit 1 when a log costs over --max-ratio x ordinary")
    parser.add_argument("--max-ratio", type=float, default=3.0)
    parser.add_argument("--only", default="", help="comma-separated parts of the row names to run")
    args = parser.parse_args()
    library = load_library(ROOT / "signatures")
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    ordinary_path = out / "train-10M.log"
    if not ordinary_path.exists():
        generate(ordinary_path, SIZE)
    ordinary = ordinary_path.read_bytes()
    base = {mode: cpu(ordinary, library, keep_log=mode, repeat=args.repeat)[0] for mode in (False, True)}
    print(f"ordinary 10 MB training log: {base[False]:.3f} s CPU, {base[True]:.3f} s with the whole log kept")
    print()
    print("| log (10 MB) | CPU s | x ordinary | CPU s, log kept | x ordinary | kept whole |")
    print("|---|---:|---:|---:|---:|---|")
    worst = 0.0
    wanted = [w for w in args.only.split(",") if w]
    for name, make in shape_logs().items():
        if wanted and not any(w in name for w in wanted):
            continue
        data = make()
        plain, _ = cpu(data, library, keep_log=False, repeat=args.repeat)
        whole, kept = cpu(data, library, keep_log=True, repeat=args.repeat)
        ratios = plain / base[False], whole / base[True]
        worst = max(worst, *ratios)
        print(
            f"| {name} | {plain:.3f} | {ratios[0]:.2f} | {whole:.3f} | {ratios[1]:.2f} | {'yes' if kept else 'no'} |",
            flush=True,
        )
    print()
    print(f"worst: {worst:.2f}x the ordinary log")
    if args.check and worst > args.max_ratio:
        print(f"FAIL: over {args.max_ratio}x")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
