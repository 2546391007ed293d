"""Pick the evidence out of a large log on the client: the one definition of what is kept,
published as data by `prefilter_spec`.

A browser (app/web/static/excerpt.js) or the CLI's remote mode reads a log where it is and
sends only an excerpt, each line with its number in the original file. The server
diagnoses the excerpt (`app.core.selection.excerpt`) and reports original line numbers. The rules,
which `prefilter_spec` publishes as data and `select_evidence` implements:

* the first `head` and the last `tail` lines of the log;
* for every pattern (the library's fingerprints, symptoms, companions and excludes, the
  engine's generic error markers and version lines, a few extra markers such as
  ``Traceback`` and ``Killed``): its first `per_pattern` matching lines, the
  `context` lines before and after each of its first `with_context` matches, and its
  last matching line;
* the last `progress` lines that match a progress pattern (loss dicts, progress bars).

A line is judged on its first `line_bytes` bytes (decoded as UTF-8, invalid bytes
replaced), with terminal escapes removed, frame by frame (a carriage return starts a
frame); it is kept as decoded, escapes included. A pattern the browser cannot run as a
regular expression (`js` is null) matches a line holding one of its `atoms`. The atoms of
a pattern the browser runs are a screen only, which Python does not use: the browser
looks for them in a block's raw bytes and runs the pattern only where they are (an escape
sequence inside a literal, a word coloured mid-message, can hide a line from the bytes:
lines with escapes are tried too). They are worked out with a wider bound (`SCREEN_SET`)
where the usual one finds none, so that fewer patterns are searched for in every block.

The caps are the matcher's own (what it records per pattern), so the server's
diagnosis of the excerpt equals its diagnosis of the whole log; only `count` is a
lower bound for a pattern found on more than `per_pattern` lines.

`select_evidence` (app/core/selection/selector.py) implements the rules in Python, screening
blocks of lines (app/core/selection/blocks.py) with one RE2 set of the patterns
(app/core/selection/screens.py).
"""

from __future__ import annotations

from typing import Any

from app.core.engine.scanner import KEEP_FIRST, KEEP_LINES, PROGRESS_TAIL
from app.core.knowledge.loading import Library
from app.core.patterns.literals import atoms, to_js

SPEC_VERSION = 1
HEAD_LINES = 50
TAIL_LINES = 50
LINE_BYTES = 32 << 10
# Alternatives tracked per node when the atoms of a pattern the browser runs are only its
# screen: with the usual bound, the checkpoint-path and Keras-file patterns have none and
# were searched for in every block, a tenth of the browser's time on a training log.
SCREEN_SET = 64

# Markers kept besides the library's own patterns: what a person looks for in a log.
MARKERS: tuple[tuple[str, str], ...] = (
    ("traceback", r"Traceback \(most recent call last\)"),
    ("killed", r"\bKilled\b"),
    ("signal", r"\b(?:SIGKILL|SIGTERM|SIGABRT|SIGSEGV|SIGBUS)\b"),
    ("exit_code", r"(?i)\bexit ?code[ :=]{1,3}-?\d"),
    ("launcher_summary", r"Root Cause \(first observed failure\)|ChildFailedError|\bFAILED\b"),
)

# The reader's escape-sequence pattern (app.core.engine.reader), for Python's `re` and JavaScript.
ANSI = (
    r"\x1b\[[0-9;:?<=>]{0,64}[ -/]{0,8}[@-~]"
    r"|\x1b\][^\x07\x1b\n]{0,4096}(?:\x07|\x1b\\)"
    r"|\x1b[@-Z\\-_]"
)


def prefilter_spec(library: Library, *, context: int = 5) -> dict[str, Any]:
    """The selection rules and patterns, as JSON a browser runs (see the module docstring)."""
    patterns: list[dict[str, Any]] = []
    seen: set[str] = set()
    entries: list[tuple[str, str, str | None, str]] = []
    for regex, rules in zip(library.regexes, library.rules, strict=True):
        rule = rules[0]
        kind: str = "progress" if all(r.kind == "progress" for r in rules) else rule.kind
        entries.append((regex, kind, rule.signature, rule.name))
    entries.extend((regex, "marker", None, name) for name, regex in MARKERS)
    for regex, kind, signature, name in entries:
        if regex in seen:
            continue
        seen.add(regex)
        js = to_js(regex)
        found = atoms(regex)
        if js is not None and found is None:
            found = atoms(regex, max_set=SCREEN_SET)
        if js is None and found is None:
            continue  # neither engine can screen for it in the browser
        patterns.append(
            {
                "id": len(patterns),
                "kind": kind,
                "signature": signature,
                "name": name,
                "regex": regex,
                "js": js[0] if js else None,
                "flags": js[1] if js else "",
                "atoms": list(found) if found else None,
            }
        )
    return {
        "version": SPEC_VERSION,
        "library_version": library.version,
        "rules": {
            "head": HEAD_LINES,
            "tail": TAIL_LINES,
            "context": context,
            "with_context": KEEP_FIRST,
            "per_pattern": KEEP_LINES + 1,  # one past what the matcher tracks: it sees the same saturation
            "progress": PROGRESS_TAIL,
            "line_bytes": LINE_BYTES,
        },
        "ansi": ANSI,
        "patterns": patterns,
    }
