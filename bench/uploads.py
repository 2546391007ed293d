"""Peak memory of a real `tracelore serve` under hostile uploads, by kind and all at once.

    python bench/uploads.py [--limit 64M] [--in-flight 4] [--signatures DIR]

For each kind of upload (large JSON logs, JSON over the limit, gzip-encoded JSON bombs,
excerpts of 200,000 lines, excerpts of a few 1,000,000-character lines, large pasted form
fields, forms of 128 files, JSON logs made of `\\\\` escapes) it starts a server with a throwaway SQLite database, warms it
up, sends four of them at once and reads the growth of the process's peak resident memory (VmHWM in /proc); then
all of them together, and 64 escape-dense JSON logs at once. It prints a markdown table next to the budget docs/self-hosting.md states:
about 64 MiB per diagnosis in flight and 3 MiB per request being read or waiting (excerpt
lines near the 1,000,000-character cap: about 16 MiB while such a request is read).
tests/web/test_memory.py runs the "all at once" and the 64 escape-dense rows and holds them to that budget.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
MiB = 1 << 20
PER_REQUEST, PER_LONG_EXCERPT, PER_DIAGNOSIS = 3 * MiB, 16 * MiB, 64 * MiB

Body = tuple[dict[str, str], bytes]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peak_rss(pid: int) -> int:
    """A process's peak resident memory (VmHWM), in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc")


def quiet_log(size: int) -> str:
    """Lines of a healthy run: nothing to match, so the time goes to reading the upload."""
    line = 'epoch 3 step 1200 loss 0.4312 lr 2.0e-05 grad_norm 0.91 tokens/s 18234 "ok"\n'
    return line * (size // len(line))


def hostile_bodies(limit: int) -> dict[str, tuple[Body, int]]:
    """Each kind of hostile upload, with the status it must get."""
    as_json = {"Content-Type": "application/json"}
    many = {"excerpt": [{"line": i, "text": "x"} for i in range(1, 200_001)], "store": False}
    long_lines = {"excerpt": [{"line": i, "text": "x" * 999_000} for i in range(1, 7)], "store": False}
    field = (
        b'--b\r\nContent-Disposition: form-data; name="log"\r\n\r\n' + quiet_log(40 * MiB).encode() + b"\r\n--b--\r\n"
    )
    rank = quiet_log(460 << 10).encode()  # 128 of them: just under a 64 MiB limit
    parts = b"".join(
        b'--b\r\nContent-Disposition: form-data; name="file"; filename="rank%d.log"\r\n\r\n' % i + rank + b"\r\n"
        for i in range(128)
    )
    job = parts + b"--b--\r\n"
    # gzip that decompresses to a JSON string of NUL escapes far over the wire cap
    bomb = gzip.compress(b'{"log": "' + b"\\u0000" * (2 * limit // 6 + MiB) + b'"}', compresslevel=9)
    return {
        "JSON log, 24 MiB": ((as_json, json.dumps({"log": quiet_log(24 * MiB), "store": False}).encode()), 200),
        "JSON log over the limit": ((as_json, json.dumps({"log": quiet_log(limit + MiB)}).encode()), 413),
        "gzip-encoded JSON bomb": (({**as_json, "Content-Encoding": "gzip"}, bomb), 413),
        "excerpt, 200,000 lines": ((as_json, json.dumps(many).encode()), 200),
        "excerpt, 1M-character lines": ((as_json, json.dumps(long_lines).encode()), 200),
        "form field, 40 MiB": (({"Content-Type": "multipart/form-data; boundary=b"}, field), 200),
        "form, 128 files": (({"Content-Type": "multipart/form-data; boundary=b"}, job), 200),
        "JSON log of escapes, 4 MiB": escape_dense(),
    }


def escape_dense(size: int = 4 * MiB) -> tuple[Body, int]:
    """A JSON log string made of `\\\\` escapes (each decodes to one backslash), and the status it must get.

    The string parser once kept a backtracking record per escape: some 30 MiB per request being read.
    """
    body = b'{"log": "' + b"\\\\" * (size // 2) + b'", "store": false}'
    return ({"Content-Type": "application/json"}, body), 200


@contextlib.contextmanager
def serve(*, limit: int, in_flight: int, signatures: Path | None = None) -> Iterator[tuple[str, int]]:
    """A `tracelore serve` process (one worker) on a throwaway database: its URL and pid."""
    with tempfile.TemporaryDirectory() as tmp:
        env = {k: v for k, v in os.environ.items() if not k.startswith("TRACELORE_") or k == "TRACELORE_CACHE_DIR"}
        env.update(
            {
                "TRACELORE_DATABASE_URL": f"sqlite:///{tmp}/bench.sqlite",
                "TRACELORE_DATA_DIR": tmp,
                "TRACELORE_MAX_UPLOAD_BYTES": str(limit),
                "TRACELORE_MAX_LOG_ANONYMOUS": str(limit),
                "TRACELORE_QUOTA_ANONYMOUS": "100000",
                "TRACELORE_MAX_IN_FLIGHT": str(in_flight),
                "TRACELORE_QUEUE_SECONDS": "300",
                "TRACELORE_SECRET_KEY": "bench",
            }
        )
        if signatures:
            env["TRACELORE_SIGNATURES_DIR"] = str(signatures)
        port = free_port()
        proc = subprocess.Popen(
            [sys.executable, "-m", "app", "serve", "--port", str(port), "--workers", "1"],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        url = f"http://127.0.0.1:{port}"
        try:
            deadline = time.monotonic() + 120
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(proc.stdout.read() if proc.stdout else "the server exited")
                with contextlib.suppress(httpx.TransportError):
                    if httpx.get(f"{url}/readyz", timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError("the server did not become ready")
                time.sleep(0.25)
            # Warm up: imports, caches and the first diagnosis are not growth.
            for headers, body in (
                ({"Content-Type": "text/plain"}, quiet_log(4 * MiB).encode()),
                ({"Content-Type": "application/json"}, json.dumps({"log": quiet_log(MiB), "store": False}).encode()),
            ):
                httpx.post(f"{url}/api/v1/diagnoses?store=false", content=body, headers=headers, timeout=120)
            yield url, proc.pid
        finally:
            proc.send_signal(signal.SIGINT)
            try:
                proc.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.communicate()


async def burst(url: str, bodies: list[Body]) -> Counter[int]:
    """Send every body at once; the statuses they got."""
    limits = httpx.Limits(max_connections=len(bodies))
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=600) as client:

        async def one(headers: dict[str, str], body: bytes) -> int:
            r = await client.post("/api/v1/diagnoses?store=false", content=body, headers=headers)
            return r.status_code

        return Counter(await asyncio.gather(*(one(h, b) for h, b in bodies)))


def budget(bodies: list[Body], in_flight: int) -> int:
    """The growth docs/self-hosting.md allows for these requests at once."""
    long_excerpts = sum(1 for _, b in bodies if b.startswith(b'{"excerpt"') and b"\\u0001" * 1000 in b)
    return PER_DIAGNOSIS * in_flight + PER_REQUEST * (len(bodies) - long_excerpts) + PER_LONG_EXCERPT * long_excerpts


def measure(
    bodies: list[Body], *, limit: int, in_flight: int, signatures: Path | None = None
) -> tuple[int, Counter[int]]:
    """Peak memory growth of a fresh server under these bodies at once, and their statuses."""
    with serve(limit=limit, in_flight=in_flight, signatures=signatures) as (url, pid):
        before = peak_rss(pid)
        statuses = asyncio.run(burst(url, bodies))
        return peak_rss(pid) - before, statuses


def all_at_once(limit: int) -> tuple[list[Body], Counter[int]]:
    """Four of each kind, and the statuses they must get."""
    bodies, expected = [], Counter[int]()
    for body, status in hostile_bodies(limit).values():
        bodies += [body] * 4
        expected[status] += 4
    return bodies, expected


def _size(text: str) -> int:
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(float(text[:-1]) * units[text[-1].upper()]) if text[-1].upper() in units else int(text)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--limit", default="64M", help="the largest log the server accepts")
    parser.add_argument("--in-flight", type=int, default=4)
    parser.add_argument("--signatures", type=Path)
    args = parser.parse_args()
    limit = _size(args.limit)
    print("| uploads at once | peak memory growth | budget | statuses |")
    print("|---|---:|---:|---|")
    failed = False
    rows = [(f"4 x {name}", [body] * 4) for name, (body, _) in hostile_bodies(limit).items()]
    rows.append((f"all of them ({len(all_at_once(limit)[0])})", all_at_once(limit)[0]))
    rows.append(("64 x JSON log of escapes, 4 MiB", [escape_dense()[0]] * 64))
    for name, bodies in rows:
        growth, statuses = measure(bodies, limit=limit, in_flight=args.in_flight, signatures=args.signatures)
        allowed = budget(bodies, args.in_flight)
        failed |= growth > allowed or any(s >= 500 for s in statuses)
        shown = ", ".join(f"{n} x {s}" for s, n in sorted(statuses.items()))
        print(f"| {name} | {growth / MiB:.0f} MiB | {allowed / MiB:.0f} MiB | {shown} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
