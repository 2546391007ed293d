"""Evidence picked out of a log client-side: atoms, JavaScript translation, the rules, excerpts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import regex

from app.core.engine.diagnose import diagnose
from app.core.knowledge.loading import Library
from app.core.patterns.literals import atoms, to_js
from app.core.selection.excerpt import Excerpt, diagnose_excerpt
from app.core.selection.rules import prefilter_spec
from app.core.selection.selector import Selector, physical_lines, select_evidence
from app.errors import EmptyLog, Invalid
from bench.loggen import generate
from tests.core.conftest import library as build
from tests.core.conftest import signature
from tests.support import SAMPLES

# --- atoms -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"CUDA out of memory", ("cuda out of memory",)),
        (r"(?:torch\.)?OutOfMemoryError", ("outofmemoryerror",)),
        (r"\{'(?:loss|eval_loss)': ", ("{'eval_loss': ", "{'loss': ")),
        (r"exitcode\s*:\s*-9", ("exitcode",)),
        (r"(?i)\bkilled\b", ("killed",)),
        (r"NCCL (?:WARN|INFO)", ("nccl info", "nccl warn")),
        (r"[Ee]rror: (?P<what>\w+)", ("error: ",)),
        (r"x{2,5}yzw", ("yzw",)),
        (r"a|bcd", None),  # one branch has no literal worth screening for
        (r"\d+%\|", None),
        (r"(?:foo)?bar", ("bar",)),
    ],
)
def test_atoms(pattern: str, expected: tuple[str, ...] | None) -> None:
    assert atoms(pattern) == expected


def _example_lines(lib: Library) -> list[str]:
    return sorted(
        {
            line
            for sig in lib.signatures.values()
            for ex in (*sig.examples.match, *sig.examples.no_match)
            for line in ex.log.splitlines()
            if line.strip()
        }
    )


def test_every_line_a_library_pattern_matches_holds_one_of_its_atoms(library: Library) -> None:
    """Soundness on real data: screening by atoms never drops a line the pattern matches."""
    lines = _example_lines(library)
    folded = [
        line.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")) for line in lines
    ]
    screened = 0
    for pattern in library.regexes:
        found = atoms(pattern)
        if found is None:
            continue
        screened += 1
        compiled = regex.compile(pattern)
        for line, low in zip(lines, folded, strict=True):
            if compiled.search(line):
                assert any(a in low for a in found), f"{pattern!r} matches {line!r} but none of {found} is in it"
    assert screened > 0.95 * len(library.regexes)


def test_every_line_a_pattern_matches_holds_one_of_the_atoms_the_browser_screens_by(library: Library) -> None:
    """The same of the published atoms, which are worked out with a wider bound where the usual one finds none."""
    lines = _example_lines(library)
    folded = [
        line.translate(str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")) for line in lines
    ]
    wider = 0
    for p in prefilter_spec(library)["patterns"]:
        if not p["atoms"]:
            continue
        wider += atoms(p["regex"]) is None
        compiled = regex.compile(p["regex"])
        for line, low in zip(lines, folded, strict=True):
            if compiled.search(line):
                assert any(a in low for a in p["atoms"]), f"{p['regex']!r} matches {line!r} but none of its atoms"
    assert wider > 0


# --- JavaScript --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "expected"),
    [
        (r"rank (?P<rank>\d+) failed", (r"rank (?<rank>\d+) failed", "")),
        (r"(?i)killed", ("killed", "i")),
        (r"quota|(?i:batch response: .{0,80}quota)", (r"quota|(?:batch response: .{0,80}quota)", "i")),
        (r"\Aline", None),
        (r"foo\Z", None),
        (r"(?P=name)", None),
        (r"[[:alpha:]]+", None),
        (r"a{,3}", None),
    ],
)
def test_to_js(pattern: str, expected: tuple[str, str] | None) -> None:
    assert to_js(pattern) == expected


def test_spec_covers_the_library_and_is_json(library: Library) -> None:
    spec = prefilter_spec(library, context=3)
    assert spec["rules"]["context"] == 3
    assert spec["rules"]["head"] > 0 and spec["rules"]["tail"] > 0
    kinds = {p["kind"] for p in spec["patterns"]}
    assert {"fingerprint", "symptom", "error", "progress", "marker"} <= kinds
    assert len(spec["patterns"]) >= len(library.regexes)
    assert all(p["js"] is not None or p["atoms"] for p in spec["patterns"])
    json.dumps(spec)


# --- the rules ---------------------------------------------------------------------------------


def _spec(**rules: int) -> dict[str, Any]:
    base = {"head": 2, "tail": 2, "context": 1, "with_context": 1, "per_pattern": 3, "progress": 2, "line_bytes": 64}
    base.update(rules)
    patterns = [
        {"id": 0, "kind": "fingerprint", "regex": "BOOM", "js": "BOOM", "flags": "", "atoms": ["boom"]},
        {"id": 1, "kind": "marker", "regex": "(?i)killed", "js": None, "flags": "", "atoms": ["killed"]},
        {"id": 2, "kind": "progress", "regex": r"loss=\d", "js": r"loss=\d", "flags": "", "atoms": ["loss="]},
    ]
    return {"version": 1, "rules": base, "ansi": r"\x1b\[[0-9;]{0,16}m", "patterns": patterns}


def _select(text: str, **rules: int) -> dict[int, str]:
    data = text.encode()
    excerpt = select_evidence([data[:7], data[7:]], _spec(**rules))  # blocks cut mid-line
    assert excerpt.total_bytes == len(data)
    return dict(excerpt.lines)


def test_head_tail_context_caps_last_and_progress() -> None:
    lines = [f"noise {i}" for i in range(1, 41)]
    for no in (10, 20, 30, 35):
        lines[no - 1] = f"step {no} BOOM"
    lines[14] = "loss=1"
    lines[24] = "loss=2"
    lines[26] = "loss=3"
    kept = _select("\n".join(lines) + "\n")
    assert sorted(kept) == [1, 2, 9, 10, 11, 20, 25, 27, 30, 35, 39, 40]
    assert kept[10] == "step 10 BOOM"  # first match: with context 9 and 11
    # 20 and 30: under the cap of 3, no context; 35: past the cap, kept as the last match.
    # 25 and 27: the last two progress lines (15 is not kept).


def test_frames_escapes_atom_only_patterns_and_long_lines() -> None:
    text = "a\nb\nprogress 1%\rprocess KILLED now\n\x1b[31mBO\x1b[0mOM\n" + "x" * 100 + "BOOM\nc\nd\ne\n"
    kept = _select(text, context=0)
    assert kept[3] == "progress 1%\rprocess KILLED now"  # a frame matches, the atom-only marker case-folded
    assert kept[4] == "\x1b[31mBO\x1b[0mOM"  # judged without escapes, kept as it was
    assert 5 not in kept  # BOOM lies past line_bytes


def test_a_last_line_without_newline_counts() -> None:
    excerpt = select_evidence([b"one\ntwo BOOM"], _spec())
    assert excerpt.total_lines == 2
    assert excerpt.total_bytes == 12
    assert excerpt.lines[-1] == (2, "two BOOM")


# --- excerpts ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("lines", "total", "message"),
    [
        (((3, "a"), (2, "b")), 5, "must increase"),
        (((1, "a\nb"),), 5, "one line per entry"),
        (((7, "a"),), 5, "less than the last line"),
    ],
)
def test_impossible_excerpts_are_refused(lines: tuple[tuple[int, str], ...], total: int, message: str) -> None:
    with pytest.raises(Invalid, match=message):
        Excerpt(lines=lines, total_lines=total, total_bytes=100).check()


def test_an_empty_excerpt_is_an_empty_log(library: Library) -> None:
    with pytest.raises(EmptyLog):
        diagnose_excerpt(Excerpt(lines=((4, "  "),), total_lines=9, total_bytes=50), library)


def test_excerpt_line_numbers_are_the_original_ones() -> None:
    lib = build(
        signature(
            "memory.boom",
            fingerprints=[
                {"name": "boom", "regex": r"BOOM (?P<size>\d+)", "weight": 0.9, "near": [r"^Traceback"]},
            ],
        )
    )
    excerpt = Excerpt(
        lines=((1000, "Traceback (most recent call last):"), (1003, "BOOM 7")), total_lines=5000, total_bytes=1 << 20
    )
    d = diagnose_excerpt(excerpt, lib, name="train.log")
    (c,) = d.candidates
    assert (c.id, c.line, c.facts["size"]) == ("memory.boom", 1003, "7")
    assert [e.line for e in c.evidence] == [1003]
    assert (d.input.lines, d.input.bytes, d.input.files) == (5000, 1 << 20, ["train.log"])
    assert d.input.excerpt is not None and d.input.excerpt.lines == 2
    # Far apart in the original, the companion no longer counts.
    apart = Excerpt(
        lines=((10, "Traceback (most recent call last):"), (1003, "BOOM 7")), total_lines=5000, total_bytes=1
    )
    assert diagnose_excerpt(apart, lib).candidates == []


def _blocks(path: Path) -> Any:
    with path.open("rb") as f:
        yield from iter(lambda: f.read(1 << 20), b"")


def _same(full: Any, part: Any) -> None:
    a, b = full.model_dump(mode="json"), part.model_dump(mode="json")
    a["input"].pop("excerpt")
    b["input"].pop("excerpt")
    assert a == b


@pytest.mark.parametrize("sample", sorted(p.name for p in SAMPLES.glob("*.log")))
def test_the_excerpt_of_a_sample_is_diagnosed_like_the_sample(sample: str, library: Library) -> None:
    path = SAMPLES / sample
    excerpt = select_evidence(_blocks(path), prefilter_spec(library))
    _same(diagnose(path, library), diagnose_excerpt(excerpt, library, name=str(path)))


def test_the_excerpt_of_a_generated_training_log_is_diagnosed_like_the_log(library: Library, tmp_path: Path) -> None:
    path = tmp_path / "train.log"
    generate(path, 4 << 20, seed=3)
    excerpt = select_evidence(_blocks(path), prefilter_spec(library))
    assert excerpt.total_bytes == path.stat().st_size
    assert len(excerpt.lines) < excerpt.total_lines // 3
    full = diagnose(path, library)
    assert full.initiating is not None
    _same(full, diagnose_excerpt(excerpt, library, name=str(path)))


def _line_by_line(data: bytes, spec: dict[str, Any]) -> Excerpt:
    selector = Selector(spec)
    for raw in physical_lines([data]):
        selector.add(raw)
    return selector.excerpt(ends_with_newline=data.endswith(b"\n"))


def test_the_fast_block_path_keeps_what_the_line_by_line_rules_keep(library: Library, tmp_path: Path) -> None:
    spec = prefilter_spec(library)
    path = tmp_path / "train.log"
    generate(path, 3 << 20, seed=5)
    logs = [path.read_bytes(), *(p.read_bytes() for p in sorted(SAMPLES.glob("*.log")))]
    logs.append(b"\x1b[31mtorch.OutOf\x1b[0mMemoryError: CUDA out of memory\r\nlast line without newline")
    for data in logs:
        blocks = [data[i : i + 65536] for i in range(0, len(data), 65536)]
        assert select_evidence(blocks, spec) == _line_by_line(data, spec)


# --- the block path over text beyond ASCII ---------------------------------------------------------

# Patterns whose text semantics differ from a byte scan's: one character of text is one to four
# bytes (`.`, negated classes, non-ASCII literals and codes, Unicode classes), case folding
# beyond ASCII (the Kelvin sign is a `k` under (?i)), anchors at frame ends.
TRICKY_PATTERNS = (
    r"(?i)kill",
    r"a.b",
    r"[^x]yz",
    r"é+",
    r"\S+Error",
    r"^start",
    r"end$",
    r"(?i)straße",
    r"x\x{e9}y",
    r"\pLq",
    r"[é]w",
    r"\xe9t",
    r"(?i)ss",
    r"a[^x]{2,}z",
    r"q.*\S+r",
)
TRICKY_LINES = (
    "aéb", b"a\xffb", "éyz", b"\xffyz", "xyz", "ééé", "€Error", b"\xe2\x82Error", "pre\rstart",
    "x\rend", "\u212aill", "ſs", "STRASSE", "straße", "xéy", b"x\xe9y", "Ωq", "éw", "ét",
    "\x1b[1mBO\x1b[0mOM", "K", "long " + "z" * 80 + "aéb", "noise", "BOOM", "ĸaboom",
    "aééz", b"a\xff\xffz", "aéz", "axéz", "qér", b"q\xe9\xe9r", "q r", "q\rér",
)  # fmt: skip


def _tricky_spec(**rules: int) -> dict[str, Any]:
    patterns: list[dict[str, Any]] = [
        {"id": i, "kind": "fingerprint" if i else "progress", "regex": r, "js": r, "flags": "", "atoms": None}
        for i, r in enumerate(TRICKY_PATTERNS)
    ]
    patterns.append(
        {
            "id": len(patterns),
            "kind": "marker",
            "regex": "(?i)boom",
            "js": None,
            "flags": "",
            "atoms": ["boom", "ĸaboom"],
        }
    )
    base = {"head": 1, "tail": 1, "context": 1, "with_context": 2, "per_pattern": 3, "progress": 2, "line_bytes": 64}
    base.update(rules)
    return {"version": 1, "rules": base, "ansi": r"\x1b\[[0-9;]{0,16}m", "patterns": patterns}


@pytest.mark.parametrize(
    "rules",
    [{}, {"per_pattern": 10**6, "with_context": 10**6, "progress": 10**6, "context": 0}],
    ids=["caps", "every-match"],
)
def test_the_block_path_finds_what_the_line_rules_find_beyond_ascii(rules: dict[str, int]) -> None:
    import random

    rnd = random.Random(9)
    picked = [rnd.choice(TRICKY_LINES) for _ in range(3000)]
    data = b"\n".join(line if isinstance(line, bytes) else line.encode() for line in picked) + b"\n"
    spec = _tricky_spec(**rules)
    want = _line_by_line(data, spec)
    assert len(want.lines) > 40
    for size in (100, 4096, 1 << 20):
        assert select_evidence([data[i : i + size] for i in range(0, len(data), size)], spec) == want
    assert select_evidence([data], spec, threads=2) == want


@pytest.mark.parametrize("pattern", TRICKY_PATTERNS)
def test_a_byte_screen_matches_every_line_whose_text_the_pattern_matches(pattern: str) -> None:
    import re2

    from app.core.patterns.rewrites import byte_superset

    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1
    screen = re2.compile(("(?m)" + byte_superset(pattern)[0]).encode("ascii"), options)
    text_pattern = re2.compile(pattern)
    for line in TRICKY_LINES:
        raw = line if isinstance(line, bytes) else line.encode()
        frames = raw.decode("utf-8", errors="replace").split("\r")
        if "\u212a" in line or "ſ" in line if isinstance(line, str) else False:
            continue  # case folding beyond ASCII: found apart (see byte_superset)
        if any(text_pattern.search(f) for f in frames):
            assert screen.search(raw), (pattern, line)
