"""The text `tracelore lsp` keeps of an open log: the same text pygls's own document would hold
after the same changes, and an append that reads no more than what was appended."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from lsprotocol import types as lsp
from pygls.workspace import TextDocument
from pygls.workspace.position_codec import PositionCodec

from app.lsp.text import LogText

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"
TQDM = (CASES / "gen-ckpt-healthy-resume-tqdm" / "log.txt").read_text(encoding="utf-8")  # "\r" progress lines
RANKS = CASES / "gen-dist-per-rank-index-error"
LOGS = {
    "tqdm": TQDM,
    "crlf": (RANKS / "rank2.log").read_text(encoding="utf-8").replace("\n", "\r\n"),
    "rank2": (RANKS / "rank2.log").read_text(encoding="utf-8"),
}
CODEC = PositionCodec(encoding=lsp.PositionEncodingKind.Utf16)
URI = "file:///logs/rank2.log"


def end_of(document: TextDocument) -> lsp.Position:
    """Where an editor appends to a document: after its last character, in UTF-16 units."""
    lines = document.lines
    if not lines or lines[-1].splitlines()[0] != lines[-1]:  # empty, or ends with a line break
        return lsp.Position(line=len(lines), character=0)
    return lsp.Position(line=len(lines) - 1, character=CODEC.client_num_units(lines[-1]))


def insert(at: lsp.Position, text: str) -> lsp.TextDocumentContentChangePartial:
    return lsp.TextDocumentContentChangePartial(range=lsp.Range(start=at, end=at), text=text)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_appends_at_every_cut_give_the_text_pygls_holds(name: str) -> None:
    log = LOGS[name]
    for seed in range(20):
        rng = random.Random(seed)
        text, document, at = LogText(URI), TextDocument(URI, source="", position_codec=CODEC), 0
        while at < len(log):
            piece = log[at : at + rng.choice([1, 2, 7, 40, 300, 5000])]  # cuts inside "\r\n" too
            at += len(piece)
            end = end_of(document)
            assert text.at_end(end, CODEC)
            change = insert(end, piece)
            text.apply(change, CODEC)
            document.apply_change(change)
            assert len(text) == len(document.source.encode("utf-8"))
        assert str(text) == document.source == log


@pytest.mark.parametrize("name", sorted(LOGS))
def test_edits_above_the_end_give_the_text_pygls_holds(name: str) -> None:
    rng = random.Random(11)
    log = LOGS[name]
    text, document = LogText(URI, log), TextDocument(URI, source=log, position_codec=CODEC)
    for _ in range(200):
        lines = document.lines
        line = rng.randrange(len(lines))
        width = CODEC.client_num_units(lines[line].rstrip("\r\n"))
        start = lsp.Position(line=line, character=rng.randint(0, width))
        end = lsp.Position(line=line, character=rng.randint(start.character, width))
        assert not text.at_end(start, CODEC) or end_of(document) == start
        change = lsp.TextDocumentContentChangePartial(
            range=lsp.Range(start=start, end=end), text=lines[rng.randrange(len(lines))]
        )
        text.apply(change, CODEC)
        document.apply_change(change)
        assert str(text) == document.source
    whole = lsp.TextDocumentContentChangeWholeDocument(text=LOGS["rank2"])
    text.apply(whole, CODEC)
    assert str(text) == LOGS["rank2"] and text.at_end(end_of(TextDocument(URI, source=LOGS["rank2"])), CODEC)


@pytest.mark.parametrize("name", sorted(LOGS))
def test_edits_in_a_text_of_many_chunks_give_the_text_pygls_holds(name: str) -> None:
    # Issue #38: an edit is applied to the chunks its lines are in, not to the whole text.
    rng = random.Random(38)
    log = LOGS[name] * (1 + (3 << 20) // len(LOGS[name]))  # a few MB: many chunks
    text, document = LogText(URI, log), TextDocument(URI, source=log, position_codec=CODEC)
    for _ in range(40):
        lines = document.lines
        line = rng.randrange(len(lines))
        end_line = min(len(lines) - 1, line + rng.choice([0, 0, 1, 3, 5000]))  # within a chunk, or across
        start = lsp.Position(line=line, character=rng.randint(0, CODEC.client_num_units(lines[line].rstrip("\r\n"))))
        end = lsp.Position(
            line=end_line, character=rng.randint(0, CODEC.client_num_units(lines[end_line].rstrip("\r\n")))
        )
        if (end.line, end.character) < (start.line, start.character):
            start, end = end, start
        new = rng.choice(["", "x", "step 7 done\n", "a\r\nb", lines[rng.randrange(len(lines))] * rng.randint(1, 3)])
        change = lsp.TextDocumentContentChangePartial(range=lsp.Range(start=start, end=end), text=new)
        before = str(text).encode("utf-8")
        offset = text.apply(change, CODEC)
        document.apply_change(change)
        after = document.source.encode("utf-8")
        assert str(text) == document.source
        assert before[:offset] == after[:offset]  # nothing before the offset it names has changed
        assert text.since(offset) == after[offset:]
        assert text.at_end(end_of(document), CODEC)


def test_an_append_to_a_long_text_reads_only_what_was_appended() -> None:
    lines = LOGS["rank2"].splitlines(keepends=True)
    head, tail = "".join(lines[:30]) * 2000, "".join(lines[30:])  # 30 lines x 2000, then the failure
    text = LogText(URI, head)
    assert text.since(len(head)) == b"" and text.read == 0
    for block in (tail, tail[:100], tail[100:]):
        before, text.read = len(text), 0
        text.apply(insert(end_of(TextDocument(URI, source=str(text))), block), CODEC)
        assert text.since(before) == block.encode("utf-8")
        assert text.read == len(block.encode("utf-8"))  # not the size of the text
    assert str(text) == head + tail + tail
    assert text.since(0) == (head + tail + tail).encode("utf-8")  # across the chunks and the open buffer
