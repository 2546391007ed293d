"""Unknown failures as templates: what a diagnosis could not explain, grouped across diagnoses.

A line no signature explains (an unexplained error line, or the unrecognised start of a run)
becomes a template: its variable parts (paths, addresses, numbers, hex, hosts, ranks, quoted
values) masked, so the same failure from two runs, two machines or two ranks gives the same
template. A cluster is the set of lines with one template.

A masking scheme rather than drain3: drain3's clusters depend on the order lines arrive in
and live in its own in-memory tree (or its own persistence), so two workers of the service,
or a re-run over the stored lines, can group differently; a template computed from the line
alone is the same in every process, can be a database key, and turns directly into a
bounded RE2 fingerprint for a draft signature.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import regex
import yaml

from app.core.engine.diagnose import diagnose
from app.core.engine.prefixes import parse_prefixes
from app.core.knowledge.loading import Library
from app.core.models import Diagnosis

# Masks, most specific first. Each is a placeholder in the template and a bounded class in a
# draft's fingerprint.
MASKS: tuple[tuple[str, str, str], ...] = (
    ("<URL>", r"\b[a-z][a-z0-9+.-]{1,15}://[^\s'\"<>()]{1,400}", r"\S{1,400}"),
    ("<EMAIL>", r"\b[\w.+-]{1,64}@[\w-]{1,63}(?:\.[\w-]{1,63}){1,8}\b", r"\S{1,200}"),
    ("<PATH>", r"(?:[A-Za-z]:\\|~?/|\./|\.\./)[^\s'\"<>():,;]{1,400}", r"\S{1,400}"),
    ("<UUID>", r"\b[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\b", r"[0-9a-fA-F-]{36}"),
    ("<HEX>", r"\b0x[0-9a-fA-F]{1,32}\b|\b[0-9a-f]{12,64}\b", r"(?:0x)?[0-9a-fA-F]{1,64}"),
    ("<DIMS>", r"\b\d+(?:[x×]\d+)+\b", r"[\dx×]{3,60}"),
    ("<IP>", r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5})?\b", r"[\d.:]{7,21}"),
    ("<HOST>", r"\b[a-z][a-z0-9-]{0,62}(?:\.[a-z0-9-]{1,63}){2,8}\b", r"[\w.-]{1,255}"),
    ("<STR>", r"'[^'\n]{1,200}'|\"[^\"\n]{1,200}\"", r"(?:'[^']{1,200}'|\"[^\"]{1,200}\")"),
    ("<NUM>", r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])", r"[-+]?[\d.eE+-]{1,40}"),
)
_MASK = regex.compile("|".join(f"(?P<m{i}>{pattern})" for i, (_, pattern, _) in enumerate(MASKS)))
_PLACEHOLDERS = {name: cls for name, _, cls in MASKS}
_SPLIT = regex.compile("(" + "|".join(regex.escape(name) for name, _, _ in MASKS) + ")")
# A numbered thing's number is a variable too: "rank3", "cuda:1", "worker-12".
_NUMBERED = regex.compile(r"(?i)\b(rank|local_rank|gpu|node|worker|device|cuda:|process|proc)([-_ ]?)\d+\b")
TEMPLATE_CAP = 400


@dataclass(frozen=True, slots=True)
class UnknownLine:
    """A line a diagnosis did not explain, with its template."""

    kind: str  # "start" (the unrecognised start of the run) or "unexplained"
    text: str  # the line as the diagnosis shows it (already redacted)
    template: str

    @property
    def key(self) -> str:
        return template_key(self.template)


def template(text: str) -> str:
    """The line with its variable parts masked and white space collapsed."""
    # Launcher and logger prefixes (times, ranks, hosts) are the line's address, not its failure.
    body = text[parse_prefixes(text).end :].strip()

    def mask(m: regex.Match[str]) -> str:
        return next(MASKS[int(k[1:])][0] for k, v in m.groupdict().items() if v is not None)

    masked = _NUMBERED.sub(lambda m: f"{m[1]}{m[2]}<NUM>", _MASK.sub(mask, body))
    return " ".join(masked.split())[:TEMPLATE_CAP]


def template_key(text: str) -> str:
    """A short stable key for a template (a database key and the cluster's name)."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def unknown_lines(diagnosis: Diagnosis) -> list[UnknownLine]:
    """What a diagnosis could not explain: its unrecognised start and its unexplained error lines."""
    out: list[UnknownLine] = []
    seen: set[str] = set()
    start = diagnosis.unrecognised_start
    items: list[tuple[str, str]] = [("start", start.text)] if start is not None else []
    items += [("unexplained", u.text) for u in diagnosis.unexplained]
    for kind, text in items:
        shape = template(text)
        if not shape or shape in seen or not _worded(shape):
            continue
        seen.add(shape)
        out.append(UnknownLine(kind, text[:2000], shape))
    return out


def _worded(shape: str) -> bool:
    """Whether a template says something: a line of only placeholders and punctuation does not."""
    words = regex.findall(r"[A-Za-z]{3,}", _SPLIT.sub(" ", shape))
    return len(words) >= 2


def fingerprint(shape: str) -> str:
    """A bounded, RE2-safe regular expression for a template: literal parts escaped, masks as classes."""
    parts = []
    for piece in _SPLIT.split(shape):
        if piece in _PLACEHOLDERS:
            parts.append(_PLACEHOLDERS[piece])
        elif piece:
            # White space was collapsed in the template: allow a run of it in the log.
            parts.append(r"\s{1,8}".join(regex.escape(word, literal_spaces=True) for word in piece.split(" ")))
    return "".join(parts)


TODO = "TODO"


def draft_signature(
    sig_id: str, shape: str, examples: Sequence[str], near_misses: Iterable[str], *, title: str | None = None
) -> str:
    """A draft signature file for a cluster: matching built from its template, knowledge left TODO.

    `tracelore lint` accepts its structure and reports each TODO, so a reviewer knows what is
    left to write; its examples are the cluster's (redacted) lines.
    """
    layer = sig_id.split(".", 1)[0]
    doc = {
        "id": sig_id,
        "title": title or f"{TODO}: {shape[:80]}",
        "layer": layer,
        "tags": [layer],
        "severity": "error",
        "summary": f"{TODO}: what failed, in two sentences a reader can act on.",
        "fingerprints": [
            {
                "name": "message",
                "regex": fingerprint(shape),
                "weight": 0.8,
                "means": f"{TODO}: what this line means.",
                "message": examples[0] if examples else shape,
            }
        ],
        "role": "root",
        "consequence_of": [],
        "mechanism": f"{TODO}: why this happens, from the raise site in the source.",
        "root_causes": [{"cause": f"{TODO}: a cause.", "tell": f"{TODO}: how to tell it apart."}],
        "confirm": [f"{TODO}: the cheapest check first."],
        "fix": [f"{TODO}: the fix."],
        "verify": f"{TODO}: a command or check that proves the fix.",
        "resume": f"{TODO}: is the last checkpoint safe to resume from?",
        "prevention": [f"{TODO}: how to keep it from happening."],
        "references": [{"title": f"{TODO}: the upstream source of the message", "url": "https://example.invalid/TODO"}],
        # Where upstream raises it: the reviewer finds the raise site and its releases.
        "raise_sites": [
            {
                "project": f"{TODO}: the project that raises or logs it",
                "where": f"{TODO}: the file and function of the raise site",
                "versions": f"{TODO}: the releases that print this wording",
                "template": shape,
                "message": examples[0] if examples else shape,
                "url": "https://example.invalid/TODO",
            }
        ],
        "examples": {
            "match": [
                {"source": "a diagnosis stored by the service (redacted)", "log": f"{line}\n"} for line in examples
            ],
            "no_match": [
                {"source": "a line of another unknown cluster (redacted)", "log": f"{line}\n"} for line in near_misses
            ],
        },
    }
    header = (
        f"# DRAFT from the unknown-failure cluster {template_key(shape)}: {shape[:200]}\n"
        "# Fill every TODO (tracelore lint lists them), cite the raise site of the message, and\n"
        "# replace the examples' source with the public thread or run they come from.\n"
    )
    return header + yaml.dump(doc, Dumper=_Dumper, sort_keys=False, allow_unicode=True, width=100)


class _Dumper(yaml.SafeDumper):
    """Multi-line strings (example logs) as literal blocks, as the library's files write them."""


def _str(dumper: yaml.SafeDumper, value: str) -> yaml.Node:
    style = "|" if "\n" in value else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", value, style=style)


_Dumper.add_representer(str, _str)


def recognised_by(lines: Sequence[str], library: Library) -> str | None:
    """The signature a library names first for a cluster's lines, if any: the cluster is no longer unknown.

    A lead (the failure of similar corpus logs) recognises nothing: the cluster stays unknown.
    """
    if not lines:
        return None
    d = diagnose("\n".join(lines).encode("utf-8"), library, threads=1)
    return next((c.id for c in d.candidates if c.basis == "signature"), None)


def similarity(a: str, b: str) -> float:
    """How alike two templates are (Jaccard over their words): to pick a cluster's near neighbours."""
    wa, wb = set(a.split()), set(b.split())
    return len(wa & wb) / len(wa | wb) if wa | wb else 0.0
