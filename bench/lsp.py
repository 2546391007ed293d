"""Memory of `tracelore lsp` while an open log keeps growing (an editor following a running job),
and (`--edits N`) how fast it takes edits inside a large open log.

    python bench/lsp.py [--minutes 4] [--block 16K] [--every 0.25] [--tracelore CMD]
                        [--check [--max-slope 2] [--max-per-text 1.5]]
    python bench/lsp.py --edits 300 [--size 20M] [--edit-every 0] [--check [--max-seconds 10]]

With --edits, a client opens a --size log (bench/loggen.py: a training run ending in an OOM and its
echoes) and, once it is diagnosed, sends N edits at random lines inside it (a few characters
rewritten, as typing does), --edit-every seconds apart (0: back to back), with a hover at the
initiating failure's line after every 10th. It prints how long the server took from the first edit
to the status of the last version (the diagnosis of the text after every edit) and how long each
hover waited; --check exits 1 past --max-seconds or when a hover waited over a second. Before the
server applied edits to the chunks they touch and let its scan catch up between messages, each
edit rescanned the log below it first: 300 edits in a 20 MB log took 188 s (issue #38).

A client (this process) starts `tracelore lsp`, opens an empty log and appends --block bytes
of generated training-log noise (bench/loggen.py) every --every seconds as incremental
changes, as an editor does when it reloads a growing file; the server scans each appended
block and publishes its diagnostics. Every second the server's resident memory (VmRSS) is
sampled from /proc. The document itself grows in the server (the editor's text is held
there, once: an append adds a chunk and the engine reads only what was appended), so RSS
grows with the text and nothing else should. It prints, over the second half of the run, the
least-squares slope of RSS minus the text's size (MB a minute) and of RSS against the text's
size (MB per MB appended), to compare builds (--tracelore measures another build's command).

--check exits 1 when, over the second half, RSS minus the text grew faster than --max-slope
MB a minute or RSS grew by more than --max-per-text MB per MB of text (the text is held once:
1.0). What still grows beyond the text is the scan's checkpoints (app/lsp/server.py): up to
MAX_CHECKPOINTS copies of the engine's hits, each capped at KEEP_LINES lines a pattern (with
no checkpoints, RSS beyond the text stays flat): +1.7 MB a minute and 1.44 MB per MB of text
over the second half of an 8-minute run. Before the server kept the text itself (pygls
rebuilt a tuple of every line and copied the whole text on each append, and held it as a
str) two 4-minute runs gave +4.5 and +14 MB a minute, 2.2 and 4.8 MB per MB of text.
It also prints the server's CPU time a change costs in each half: about the same in both when
a change costs what it appends (x1.09 over 8 minutes; x2.95 before, over 4).
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO, Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.loggen import _noise, parse_size  # noqa: E402
from bench.watch import cpu_seconds, least_squares, rss_mb, rss_slope  # noqa: E402

URI = "file:///bench/rank0.log"


def end_after(lines: int, tail: str, block: str) -> tuple[int, str]:
    """The lines ended and the text after the last line break once a block is appended.

    LSP counts "\r" (tqdm's progress lines) as a line break as well as "\n": counting only
    "\n" would put each change above the end of the document, not at it."""
    parts = (tail + block).splitlines(keepends=True)
    last = parts[-1]
    ended = last.splitlines()[0] != last and not last.endswith("\r")  # a "\r" may yet get its "\n"
    return lines + (len(parts) if ended else len(parts) - 1), "" if ended else last


def position(lines: int, tail: str) -> dict[str, int]:
    """The end of the document, in UTF-16 units (what LSP counts by default)."""
    if tail.endswith("\r"):
        return {"line": lines + 1, "character": 0}
    return {"line": lines, "character": len(tail.encode("utf-16-le")) // 2}


def send(pipe: IO[bytes], message: dict[str, Any]) -> None:
    body = json.dumps({"jsonrpc": "2.0", **message}).encode()
    pipe.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    pipe.flush()


def drain(pipe: IO[bytes], answered: threading.Event) -> None:
    """Read the server's messages (diagnostics, the initialize answer) so it never blocks on a full pipe."""
    while True:
        header = b""
        while not header.endswith(b"\r\n\r\n"):
            byte = pipe.read(1)
            if not byte:
                return
            header += byte
        length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
        message = json.loads(pipe.read(length))
        if message.get("id") == 1:
            answered.set()


class Peer:
    """The client's side of the conversation: what the server sent, and when."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        assert proc.stdin is not None and proc.stdout is not None
        self.proc, self.pipe = proc, proc.stdin
        self.answers: dict[int, tuple[float, Any]] = {}  # request id: (monotonic time, result)
        self.statuses: list[tuple[float, dict[str, Any]]] = []
        self.changed = threading.Condition()
        threading.Thread(target=self._read, args=(proc.stdout,), daemon=True).start()

    def _read(self, pipe: IO[bytes]) -> None:
        while True:
            header = b""
            while not header.endswith(b"\r\n\r\n"):
                byte = pipe.read(1)
                if not byte:
                    return
                header += byte
            length = int(header.split(b"Content-Length:")[1].split(b"\r\n")[0])
            message = json.loads(pipe.read(length))
            with self.changed:
                if "id" in message and "method" not in message:
                    self.answers[message["id"]] = (time.monotonic(), message.get("result"))
                elif message.get("method") == "tracelore/status":
                    self.statuses.append((time.monotonic(), message["params"]))
                self.changed.notify_all()

    def wait(self, test: Any, timeout: float = 600) -> Any:
        with self.changed:
            if not self.changed.wait_for(test, timeout):
                sys.exit("the server did not answer in time")
            return test()


def edits_main(args: argparse.Namespace) -> None:
    from bench.loggen import generate

    tracelore = args.tracelore or str(Path(sys.executable).with_name("tracelore"))
    out = ROOT / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"lsp-edits-{args.size}.log"
    if not path.exists():
        generate(path, args.size)
    text = path.read_text(encoding="utf-8", errors="replace")
    lines = text.split("\n")
    proc = subprocess.Popen([tracelore, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    peer = Peer(proc)
    init = {"processId": None, "rootUri": None, "capabilities": {}}
    send(peer.pipe, {"id": 1, "method": "initialize", "params": init})
    peer.wait(lambda: 1 in peer.answers)
    send(peer.pipe, {"method": "initialized", "params": {}})
    opened = time.monotonic()
    doc = {"uri": URI, "languageId": "log", "version": 1, "text": text}
    send(peer.pipe, {"method": "textDocument/didOpen", "params": {"textDocument": doc}})
    first = peer.wait(lambda: peer.statuses[0][1] if peer.statuses else None)
    initiating = first["initiating"]
    print(f"opened {args.size / 1e6:.0f} MB in {time.monotonic() - opened:.1f} s: {first['verdict']}")
    hover_line = (initiating or {}).get("line", len(lines)) - 1
    rng = random.Random(38)
    hovers: list[tuple[int, float]] = []  # (request id, sent)
    started = time.monotonic()
    for version in range(2, args.edits + 2):
        line = rng.randrange(int(len(lines) * 0.95))  # inside the log, above its failure
        width = min(5, len(lines[line]))
        new = "".join(rng.choice("abcdefghij") for _ in range(width))
        lines[line] = new + lines[line][width:]
        change = {
            "range": {"start": {"line": line, "character": 0}, "end": {"line": line, "character": width}},
            "text": new,
        }
        params = {"textDocument": {"uri": URI, "version": version}, "contentChanges": [change]}
        send(peer.pipe, {"method": "textDocument/didChange", "params": params})
        if version % 10 == 0:
            ident = 1000 + version
            position = {"line": hover_line, "character": 0}
            hover = {"textDocument": {"uri": URI}, "position": position}
            send(peer.pipe, {"id": ident, "method": "textDocument/hover", "params": hover})
            hovers.append((ident, time.monotonic()))
        if args.edit_every:
            time.sleep(args.edit_every)
    last = args.edits + 1
    final = peer.wait(lambda: next((t for t, st in peer.statuses if st["documents"][0].get("version") == last), None))
    took = final - started
    waits = sorted(
        peer.wait(
            lambda: (
                [peer.answers[i][0] - sent for i, sent in hovers] if all(i in peer.answers for i, _ in hovers) else None
            )
        )
    )
    cpu = cpu_seconds(proc.pid)
    proc.stdin.close() if proc.stdin else None
    proc.terminate()
    proc.wait(60)
    statuses = sum(1 for t, _ in peer.statuses if t >= started)
    print(
        f"{args.edits} edits at random lines of a {args.size / 1e6:.0f} MB log: the last version diagnosed "
        f"{took:.2f} s after the first edit ({statuses} statuses meanwhile; server CPU in all {cpu:.1f} s)"
    )
    print(f"{len(waits)} hovers: median {waits[len(waits) // 2] * 1e3:.0f} ms, longest {waits[-1] * 1e3:.0f} ms")
    if args.check:
        failed = []
        if took > args.max_seconds:
            failed.append(f"the edits took {took:.1f} s, over {args.max_seconds} s")
        if waits[-1] > 1.0:
            failed.append(f"a hover waited {waits[-1]:.1f} s")
        if failed:
            sys.exit("FAIL: " + "; ".join(failed))
        print(f"OK: within {args.max_seconds} s, every hover answered within a second")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=4)
    parser.add_argument("--block", type=parse_size, default=parse_size("16K"), help="bytes appended per change")
    parser.add_argument("--every", type=float, default=0.25, help="seconds between changes")
    parser.add_argument(
        "--tracelore", default=None, help="the command to measure (default: the one beside this Python)"
    )
    parser.add_argument("--check", action="store_true", help="exit 1 if memory grew beyond the bounds below")
    parser.add_argument("--max-slope", type=float, default=2.0, help="MB a minute of RSS beyond the text (--check)")
    parser.add_argument("--max-per-text", type=float, default=1.5, help="MB of RSS per MB of text (--check)")
    parser.add_argument("--edits", type=int, default=0, help="measure N edits inside a large log instead")
    parser.add_argument("--size", type=parse_size, default=parse_size("20M"), help="the log's size (--edits)")
    parser.add_argument("--edit-every", type=float, default=0.0, help="seconds between edits (--edits)")
    parser.add_argument("--max-seconds", type=float, default=10.0, help="for all the edits (--edits --check)")
    args = parser.parse_args()
    if args.edits:
        edits_main(args)
        return

    tracelore = args.tracelore or str(Path(sys.executable).with_name("tracelore"))
    proc = subprocess.Popen([tracelore, "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    answered = threading.Event()
    threading.Thread(target=drain, args=(proc.stdout, answered), daemon=True).start()
    send(
        proc.stdin,
        {"id": 1, "method": "initialize", "params": {"processId": None, "rootUri": None, "capabilities": {}}},
    )
    if not answered.wait(120):
        sys.exit("the server did not answer initialize")
    send(proc.stdin, {"method": "initialized", "params": {}})
    doc = {"uri": URI, "languageId": "log", "version": 1, "text": ""}
    send(proc.stdin, {"method": "textDocument/didOpen", "params": {"textDocument": doc}})

    rng, step, lines, tail, chars, version = random.Random(7), 0, 0, "", 0, 1
    samples: list[tuple[float, float, float]] = []  # (elapsed, RSS MB, text MB)
    cpu: list[tuple[float, int, float]] = []  # (elapsed, changes sent, the server's CPU seconds)
    started = next_sample = time.monotonic()
    duration = args.minutes * 60
    print(f"{'min':>5} {'text MB':>8} {'RSS MB':>7} {'beyond MB':>9}")
    last_row = -60.0
    try:
        while (now := time.monotonic()) < started + duration:
            pieces: list[str] = []
            size = 0
            while size < args.block:
                for piece in _noise(rng, 4, step):
                    text = piece.decode("utf-8", errors="replace")  # an editor holds text
                    pieces.append(text)
                    size += len(text)
                step += 1
            block = "".join(pieces)
            version += 1
            at = position(lines, tail)
            change = {"range": {"start": at, "end": at}, "text": block}
            params = {"textDocument": {"uri": URI, "version": version}, "contentChanges": [change]}
            send(proc.stdin, {"method": "textDocument/didChange", "params": params})
            lines, tail = end_after(lines, tail, block)
            chars += len(block.encode("utf-8"))  # the text's size as UTF-8, as the server holds it
            if now >= next_sample:
                rss = rss_mb(proc.pid)
                samples.append((now - started, rss, chars / 2**20))
                cpu.append((now - started, version - 1, cpu_seconds(proc.pid)))
                next_sample += 1.0
                if now - started - last_row >= 60:
                    last_row = now - started
                    print(f"{last_row / 60:5.1f} {chars / 1e6:8.1f} {rss:7.1f} {rss - chars / 2**20:9.1f}", flush=True)
            time.sleep(max(0.0, args.every - (time.monotonic() - now)))
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(60)
    half = [s for s in samples if s[0] >= duration / 2]
    beyond = [(t, rss - text) for t, rss, text in half]
    slope = rss_slope(beyond)
    per_text = least_squares([(text, rss) for _, rss, text in half])  # MB of RSS per MB of text
    print()
    print(f"text: {chars / 1e6:.1f} MB in {version - 1} changes over {args.minutes:.1f} min")
    print(
        f"second half: RSS beyond the text {min(m for _, m in beyond):.1f} to {max(m for _, m in beyond):.1f} MB, "
        f"slope {'n/a' if slope is None else f'{slope:+.3f}'} MB/min; "
        f"RSS {'n/a' if per_text is None else f'{per_text:.2f}'} MB per MB of text ({len(half)} samples)"
    )
    # CPU a change costs, second half against first: 1.0 when a change costs what it appends.
    mid = next(c for c in cpu if c[0] >= duration / 2)
    per_change = [(b[2] - a[2]) / max(1, b[1] - a[1]) for a, b in ((cpu[0], mid), (mid, cpu[-1]))]
    print(
        f"server CPU a change: {per_change[0] * 1e3:.1f} ms in the first half, {per_change[1] * 1e3:.1f} ms in the "
        f"second (x{per_change[1] / per_change[0]:.2f})"
    )
    if args.check:
        failed = []
        if slope is None or slope > args.max_slope:
            failed.append(f"RSS beyond the text grew faster than {args.max_slope} MB a minute")
        if per_text is None or per_text > args.max_per_text:
            failed.append(f"RSS grew by more than {args.max_per_text} MB per MB of text")
        if failed:
            sys.exit("FAIL: " + "; ".join(failed))
        print(f"OK: within {args.max_slope} MB a minute beyond the text and {args.max_per_text} MB per MB of text")


if __name__ == "__main__":
    main()
