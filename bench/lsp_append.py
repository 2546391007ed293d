"""What one append to a long open log allocates: pygls's document against `tracelore lsp`'s text.

    python bench/lsp_append.py [--mb 5] [--block 16K] [--appends 10]

Appends --block characters of a corpus log (tests/corpus) at the end of a --mb MB document,
as an editor's incremental change, and reads what the engine is given, on pygls's
TextDocument (the change, then its `source`, as the server did before) and on LogText
(app/lsp/text.py). It prints tracemalloc's peak of the bytes allocated during each append (a
count, not a timing) and the ratio: pygls's grows with the document (a tuple of every line,
a copy of the text), LogText's with the block.
"""

from __future__ import annotations

import argparse
import sys
import tracemalloc
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from lsprotocol import types as lsp  # noqa: E402
from pygls.workspace import TextDocument  # noqa: E402
from pygls.workspace.position_codec import PositionCodec  # noqa: E402

from app.lsp.text import LogText  # noqa: E402
from bench.loggen import parse_size  # noqa: E402

LOG = ROOT / "tests" / "corpus" / "cases" / "gen-dist-per-rank-index-error" / "rank0.log"
URI = "file:///bench/rank0.log"


def peak_per_append(kind: str, base: str, block: str, appends: int) -> float:
    """Mean peak bytes allocated by one append (and the read that follows it)."""
    codec = PositionCodec()
    pygls = TextDocument(URI, source=base, position_codec=codec)
    ours = LogText(URI, base)
    lines = base.count("\n")
    peaks = []
    tracemalloc.start()
    for _ in range(appends):
        at = lsp.Position(line=lines, character=0)
        change = lsp.TextDocumentContentChangePartial(range=lsp.Range(start=at, end=at), text=block)
        tracemalloc.reset_peak()
        before = tracemalloc.get_traced_memory()[0]
        if kind == "pygls":
            pygls.apply_change(change)
            pygls.source[-len(block) :].encode("utf-8")  # what the server fed the engine
        else:
            ours.apply(change, codec)
            ours.since(len(ours) - len(block.encode("utf-8")))
        peaks.append(tracemalloc.get_traced_memory()[1] - before)
        lines += block.count("\n")
    tracemalloc.stop()
    return sum(peaks) / len(peaks)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mb", type=float, default=5, help="MB of text before the appends")
    parser.add_argument("--block", type=parse_size, default=parse_size("16K"), help="characters appended each time")
    parser.add_argument("--appends", type=int, default=10)
    args = parser.parse_args()
    log = LOG.read_text(encoding="utf-8")
    block = (log * (1 + args.block // len(log)))[: args.block]
    block = block[: block.rfind("\n") + 1]
    base = (block * (1 + int(args.mb * 2**20) // len(block)))[: int(args.mb * 2**20)]
    base = base[: base.rfind("\n") + 1]
    old = peak_per_append("pygls", base, block, args.appends)
    new = peak_per_append("logtext", base, block, args.appends)
    print(f"a {len(block) / 1024:.0f} KiB append to a {len(base) / 2**20:.1f} MiB document allocates at its peak:")
    print(f"  pygls TextDocument: {old / 2**20:8.2f} MiB")
    print(f"  LogText:            {new / 2**20:8.2f} MiB  ({old / new:.0f}x less)")


if __name__ == "__main__":
    main()
