"""Secret redaction: replace secrets in log text by typed placeholders, in linear time.

The rules are data (app/core/redaction/rules.py). Every pattern runs on RE2, so a hostile
line costs time proportional to its length, never more. A secret is replaced where it
stands by `[REDACTED:<type>]`: line breaks, line numbers and the words around it stay, so
evidence and diagnoses read the same. Multi-line PEM private keys are removed by a line
state machine (`Redactor.stream`), not by one regex across lines.

Pure functions only: no I/O, no settings. Callers choose whether network identifiers
(IP addresses, internal host names) are redacted.
"""

from __future__ import annotations

import functools
import re
from bisect import bisect_right
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

import re2

from app.core.patterns.re2calls import find
from app.core.patterns.rewrites import open_repeats
from app.core.redaction.guards import GUARDS, guard_token
from app.core.redaction.guards import entropy as entropy  # importable from here, as before
from app.core.redaction.guards import is_secret_env_name as is_secret_env_name
from app.core.redaction.rules import RULES
from app.errors import OverBudget

MARK = "[REDACTED:"
PLACEHOLDER = MARK + "{}]"
NETWORK = "network"
PEM_MAX_LINES = 200  # a BEGIN without an END stops redacting after this many lines

_OPTIONS = re2.Options()
_OPTIONS.max_mem = 64 << 20
# The gates only say where some rule may match: compiled without the rules' groups, RE2 finds a
# match's start with its DFAs alone (with them it ran a submatch engine too: 4 us a hit line, not 1.5).
_GATE_OPTIONS = re2.Options()
_GATE_OPTIONS.max_mem = 64 << 20
_GATE_OPTIONS.never_capture = True
_PEM_BEGIN = re2.compile(r"-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_PEM_END = re2.compile(r"-----END[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----")
_PEM_BODY = re2.compile(r"^\s{0,16}[A-Za-z0-9+/]{40,100}={0,2}\s{0,4}$")
_PLACEHOLDER_RE = re2.compile(r"\[REDACTED:([a-z0-9-]{1,40})\]")
_PLACEHOLDER_BYTES = re.compile(rb"\[REDACTED:[a-z0-9-]{1,40}\]")  # bounded, no nested repeats: linear
_UNANCHORED = re2._Anchor.UNANCHORED


def placeholder(kind: str) -> str:
    """The text that stands in for a secret of this type."""
    return PLACEHOLDER.format(kind)


@dataclass(frozen=True)
class Rule:
    """One compiled redaction rule."""

    type: str
    regex: Any
    group: int
    guard: str | None
    hints: tuple[str, ...]
    rule_group: str
    positive: tuple[str, ...]
    negative: tuple[str, ...]

    def keep(self, value: str, match: Any) -> bool:
        return self.guard is None or GUARDS[self.guard](value, match)


def _compile(spec: Mapping[str, Any]) -> Rule:
    guard = spec.get("guard")
    if guard is not None and guard not in GUARDS:
        raise ValueError(f"redaction rule {spec['type']}: unknown guard {guard!r}")
    return Rule(
        type=spec["type"],
        regex=re2.compile(spec["pattern"], _OPTIONS),
        group=spec.get("group", 0),
        guard=guard,
        hints=tuple(h.lower() for h in spec.get("hints", ())),
        rule_group=spec.get("rule_group", "secret"),
        positive=tuple(spec.get("positive", ())),
        negative=tuple(spec.get("negative", ())),
    )


@lru_cache(maxsize=1)
def all_rules() -> tuple[Rule, ...]:
    """Every rule, compiled once, in the order they apply."""
    return tuple(_compile(spec) for spec in RULES)


def secret_types(*, network: bool = True) -> list[str]:
    """The placeholder types the rules can produce."""
    return sorted({r.type for r in all_rules() if network or r.rule_group != NETWORK} | {"private-key"})


_NOTHING: Mapping[str, int] = MappingProxyType({})
MEMO_CHARS = 4 << 20  # text of the lines a stream remembers the redaction of (then it forgets them all)


class Budget:
    """Work a redaction may do, in units: a line the gate flags, a line through the rules, a rule applied to a
    line (one more for each 128 bytes of it: the rule reads all of it), a match looked at.

    Each unit costs about a microsecond or two, so a budget granted per byte of text bounds the
    time that text can take, however dense in secret-like tokens it is (issue #38).
    """

    __slots__ = ("left",)

    def __init__(self, units: int = 0) -> None:
        self.left = units

    def grant(self, units: int) -> None:
        self.left += units

    def spend(self, units: int = 1) -> None:
        self.left -= units
        if self.left < 0:
            raise OverBudget


@dataclass
class Redacted:
    """Redacted text and what was removed from it, by type (never the values)."""

    text: str
    counts: Mapping[str, int] = field(default_factory=dict)  # read-only: results that removed nothing share one


class Redactor:
    """Applies the rules to lines of text. Immutable and thread-safe; `stream()` holds PEM state."""

    def __init__(self, *, network: bool = True, enabled: bool = True) -> None:
        # Rules compile on first use, not at import: `import app.core` stays cheap for the CLI.
        self.network = network
        self.enabled = enabled

    @functools.cached_property
    def rules(self) -> tuple[Rule, ...]:
        if not self.enabled:
            return ()
        return tuple(r for r in all_rules() if self.network or r.rule_group != NETWORK)

    @functools.cached_property
    def _alternatives(self) -> str:
        # One automaton for every rule: most lines match none and cost one linear scan. Over a
        # block of lines (multi-line mode) it finds the few lines worth running the rules on.
        # Bounds opened: a gate only says where a rule may match (each rule then applies
        # exactly), and RE2 compiles `{8,1000}` as a thousand states: 0.2 s at start-up.
        # From the specs, not the compiled rules: those compile only once a line needs them.
        if not self.enabled:
            return "$^"
        wanted = (spec["pattern"] for spec in RULES if self.network or spec.get("rule_group", "secret") != NETWORK)
        return "|".join(f"(?:{open_repeats(pattern)})" for pattern in wanted)

    @functools.cached_property
    def _any(self) -> Any:
        return re2.compile(self._alternatives, _GATE_OPTIONS)

    @functools.cached_property
    def _block(self) -> Any:
        return re2.compile(f"(?m){self._alternatives}|{open_repeats(_PEM_BODY.pattern)}", _GATE_OPTIONS)

    @functools.cached_property
    def _which(self) -> Any:
        """A Set of every rule's pattern (bounds opened): one scan of a line names the rules that may match it.

        Only those are applied: testing each rule's hints in turn (some fifty, `h in low`) and then
        applying every rule whose hint is as common as `.` or `:` cost more than the rules did on a
        line dense in tokens.
        """
        found = re2._re2.Set(_UNANCHORED, _GATE_OPTIONS)
        for rule in self.rules:
            found.Add(open_repeats(rule.regex.pattern).encode())
        found.Compile()
        return found

    def line(self, text: str, budget: Budget | None = None, *, gated: bool = False) -> Redacted:
        """Redact one line (no line breaks expected; a PEM block on one line is removed whole).

        `gated`: the block gate has already found something on this line (`text()`), so the line
        gate is not asked again.
        """
        if not self.enabled or not text or text.isspace():
            return Redacted(text, _NOTHING)
        data = text.encode("utf-8", errors="surrogatepass")
        if find(_PEM_BODY, data) >= 0 and guard_token(text.strip(), None) and _mixed_case(text):
            return Redacted(_keep_indent(text) + placeholder("private-key"), {"private-key": 1})
        if not gated and find(self._any, data) < 0:
            return Redacted(text, _NOTHING)  # most lines: no Counter built for them
        counts: Counter[str] = Counter()
        # The rules are named on the line as it came: a placeholder a rule puts in holds no secret.
        for i in sorted(self._which.Match(data)):
            text = _apply(self.rules[i], text, counts, budget)
        return Redacted(text, counts)

    def text(self, text: str, stream: RedactionStream | None = None) -> Redacted:
        """Redact a block of lines, keeping every line break; PEM keys spanning lines go whole.

        One scan of the block finds the lines any rule could touch; only those (and the lines
        inside a PEM key) go through the rules. Pass `stream` to carry PEM state across blocks.
        """
        stream = stream or self.stream()
        before = Counter(stream.counts)
        lines = text.split("\n")
        hits = self._hit_lines(text, stream.budget) if self.enabled else set()
        out = [
            stream.line(line, gated=i in hits) if stream.in_key or i in hits else line for i, line in enumerate(lines)
        ]
        return Redacted("\n".join(out), stream.counts - before)

    def _hit_lines(self, text: str, budget: Budget | None = None) -> set[int]:
        """Indexes of the lines of a block on which some rule (or a PEM body) matches."""
        data = text.encode("utf-8", errors="surrogatepass")
        size = len(data)
        hits: set[int] = set()
        pos = line = counted = 0
        while pos < size:
            start = find(self._block, data, pos, size)
            if start < 0:
                break
            if budget is not None:
                budget.spend()
            line += data.count(b"\n", counted, start)
            counted = start
            hits.add(line)
            end = data.find(b"\n", start)
            if end < 0:
                break
            pos = end + 1
        return hits

    def stream(self, budget: Budget | None = None) -> RedactionStream:
        """A stateful redactor for consecutive lines of one file (raising OverBudget once `budget` is spent)."""
        return RedactionStream(self, budget)


class RedactionStream:
    """Redacts consecutive lines, removing the body of multi-line PEM private keys.

    A line seen before (outside a key) is redacted from memory: logs repeat their lines, and a
    log of one secret-laden line repeated cost as much as one of distinct lines.
    """

    def __init__(self, redactor: Redactor, budget: Budget | None = None) -> None:
        self.redactor = redactor
        self.budget = budget
        self.counts: Counter[str] = Counter()
        self.in_key = 0  # lines left to redact inside a BEGIN ... END block (0: not in one)
        self._memo: dict[str, tuple[str, Mapping[str, int]]] = {}
        self._memo_chars = 0

    def line(self, text: str, *, gated: bool = False) -> str:
        """The redacted line; keeps track of PEM blocks across calls (`gated`: see `Redactor.line`)."""
        if not self.redactor.enabled:
            return text
        if self.in_key:
            end = _PEM_END.search(text)
            if end is None:
                self.in_key -= 1
                return _keep_indent(text) + placeholder("private-key") if text.strip() else text
            self.in_key = 0
            text = placeholder("private-key") + text[end.end() :]
            # The rest of the line (rare) goes through the rules; the key itself was counted at BEGIN.
            return self._rules(text)
        known = self._memo.get(text)
        if known is not None:
            self.counts.update(known[1])
            return known[0]
        begin = _PEM_BEGIN.search(text)
        if begin is not None and _PEM_END.search(text, begin.end()) is None and "\\n" not in text[begin.end() :]:
            self.counts["private-key"] += 1
            self.in_key = PEM_MAX_LINES
            return self._rules(text[: begin.start()]) + placeholder("private-key")
        done = self._redact(text, gated=gated)
        if self._memo_chars > MEMO_CHARS:
            self._memo.clear()
            self._memo_chars = 0
        self._memo[text] = (done.text, done.counts)
        self._memo_chars += len(text)
        return done.text

    def _redact(self, text: str, *, gated: bool = False) -> Redacted:
        if self.budget is not None:
            self.budget.spend()
        done = self.redactor.line(text, self.budget, gated=gated)
        self.counts.update(done.counts)
        return done

    def _rules(self, text: str) -> str:
        return self._redact(text).text


def _mixed_case(text: str) -> bool:
    return any(c.isupper() for c in text) and any(c.islower() for c in text)


def _keep_indent(text: str) -> str:
    return text[: len(text) - len(text.lstrip())]


class _Match:
    """What a guard may look at besides the value: the text before it and the first group."""

    __slots__ = ("_data", "_spans")

    def __init__(self, data: bytes, spans: list[tuple[int, int]]) -> None:
        self._data, self._spans = data, spans

    def before(self, size: int) -> str:
        start = self._spans[0][0]
        return self._data[max(0, start - size) : start].decode("utf-8", errors="replace")

    def group(self, index: int) -> str:
        start, end = self._spans[index]
        return self._data[start:end].decode("utf-8", errors="replace") if start >= 0 else ""


def _apply(rule: Rule, text: str, counts: Counter[str], budget: Budget | None = None) -> str:
    """Replace the rule's group in every match on one line; return the same object if nothing changed.

    Works on UTF-8 bytes with the raw RE2 matcher: the wrapper's finditer converts offsets
    per match, which made lines with a hundred thousand matches cost seconds.
    """
    data = text.encode("utf-8", errors="surrogatepass")
    regexp, size = rule.regex._regexp, len(data)
    if budget is not None:
        budget.spend(1 + size // 128)
    done = [m.span() for m in _PLACEHOLDER_BYTES.finditer(data)] if MARK in text else []
    done_starts = [s for s, _ in done]
    pieces: list[bytes] = []
    last = pos = 0
    while pos <= size:
        spans = regexp.Match(_UNANCHORED, data, pos, size)
        (s0, e0), (start, end) = spans[0], spans[rule.group]
        if s0 < 0:
            break
        pos = e0 if e0 > s0 else e0 + 1
        if budget is not None:
            budget.spend()
        if start < last or start < 0:
            continue
        i = bisect_right(done_starts, end) - 1  # the last placeholder starting before the value ends
        if i >= 0 and done[i][1] > start:
            continue  # never redact (part of) a placeholder again
        value = data[start:end].decode("utf-8", errors="replace")
        if not rule.keep(value, _Match(data, spans)):
            continue
        pieces.append(data[last:start])
        pieces.append(placeholder(rule.type).encode())
        counts[rule.type] += 1
        last = end
    if not pieces:
        return text
    pieces.append(data[last:])
    return b"".join(pieces).decode("utf-8", errors="surrogatepass")


DEFAULT = Redactor()
NOTHING = Redactor(enabled=False)  # to compare a diagnosis with and without redaction


def count_placeholders(texts: Iterable[str]) -> dict[str, int]:
    """Placeholders by type in redacted lines, in order: what the reader is told was removed.

    The lines of one PEM key (each replaced by a placeholder) count as one key.
    """
    counts: Counter[str] = Counter()
    key, in_key = placeholder("private-key"), False
    for text in texts:
        if text.strip() == key and in_key:
            continue
        in_key = text.endswith(key)
        if MARK in text:
            counts.update(m.group(1) for m in _PLACEHOLDER_RE.finditer(text))
    return dict(sorted(counts.items()))


def redact_lines(lines: Iterable[str], *, redactor: Redactor = DEFAULT) -> Iterator[str]:
    """Consecutive lines of one file, redacted (PEM state carried across lines)."""
    stream = redactor.stream()
    for line in lines:
        yield stream.line(line)
