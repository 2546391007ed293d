"""The encyclopedia's view of signatures: sections in reading order, related entries, text and code rendering.

Everything here is computed from a `Library` alone (no request, no database), so the
service and the static site render the same pages.
"""

from __future__ import annotations

import json
import math
import re
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pygments
from markupsafe import Markup, escape
from pygments.formatters import HtmlFormatter
from pygments.lexer import Lexer
from pygments.lexers import TextLexer, get_lexer_by_name
from pygments.util import ClassNotFound

from app.core import Library
from app.core.knowledge import Example, Pattern, Signature

# Layers in the order a person debugging a run meets them; unknown layers follow alphabetically.
LAYER_TITLES = {
    "memory": "Memory",
    "gpu_runtime": "GPU runtime",
    "distributed": "Distributed training",
    "data": "Data and data loading",
    "checkpoint": "Checkpoints",
    "numerics": "Numerics",
    "environment": "Environment and installation",
    "cache_and_storage": "Cache and storage",
    "compile": "Compilers (torch.compile, Triton)",
    "process": "Process crashes",
    "frameworks": "Frameworks and libraries",
    "scheduler_and_infra": "Scheduler and infrastructure",
    "orchestration": "Orchestration (Ray)",
    "network": "Network and hubs",
    "tracking": "Experiment tracking",
    "serving": "Serving",
}


def layer_title(layer: str) -> str:
    """The heading of a layer."""
    return LAYER_TITLES.get(layer, layer.replace("_", " ").capitalize())


def layer_order(layer: str) -> tuple[int, str]:
    """Sort key of a layer."""
    known = list(LAYER_TITLES)
    return (known.index(layer) if layer in known else len(known), layer)


# Sections of an entry page, in the order the page shows them: (anchor, heading, present?).
SECTIONS: tuple[tuple[str, str, Callable[[Signature], bool]], ...] = (
    ("quick-answer", "Quick answer", lambda s: True),
    ("symptoms", "Symptoms: what the log says", lambda s: bool(symptom_rows(s))),
    ("mechanism", "What happens", lambda s: True),
    ("root-causes", "Root causes", lambda s: bool(s.root_causes)),
    ("confirm", "How to confirm", lambda s: bool(s.confirm)),
    ("fix", "Fix", lambda s: bool(s.fix)),
    ("verify", "Verify the fix", lambda s: True),
    ("resume", "Resume from the last checkpoint?", lambda s: True),
    ("versions", "Versions", lambda s: bool(s.applies_to or s.version_notes)),
    ("dead-ends", "What does not work", lambda s: bool(s.dead_ends)),
    ("prevention", "Prevention", lambda s: bool(s.prevention)),
    ("code-examples", "Code examples", lambda s: bool(s.code_examples)),
    ("error-messages", "Error messages", lambda s: bool(messages(s))),
    ("references", "References", lambda s: bool(s.references)),
    ("related", "Related failures", lambda s: True),  # shown when the entry has any relation
    ("faq", "FAQ", lambda s: bool(s.faq)),
    ("paste-log", "Paste your log", lambda s: True),
)


@dataclass(frozen=True)
class SymptomRow:
    """One line of the symptoms table: a message as the log shows it and what it means."""

    name: str
    kind: str  # "fingerprint" or "symptom"
    message: str | None
    regex: str
    means: str | None


def symptom_rows(sig: Signature) -> list[SymptomRow]:
    """Fingerprints, then symptoms, that say something to a reader (a message or a meaning)."""
    rows = []
    for kind, patterns in (("fingerprint", sig.fingerprints), ("symptom", sig.symptoms)):
        for p in patterns:
            if p.message or p.means:
                rows.append(SymptomRow(p.name, kind, p.message, p.regex, p.means))
    return rows


def excerpts(sig: Signature) -> tuple[list[Example], list[Example]]:
    """The match examples: those posted in a public thread (a URL), and those rebuilt from a message format."""
    real = [e for e in sig.examples.match if _URL.match(e.source)]
    return real, [e for e in sig.examples.match if not _URL.match(e.source)]


def messages(sig: Signature) -> list[str]:
    """The literal messages of a signature's patterns, each once, fingerprints first."""
    seen: dict[str, None] = {}
    for p in sig.all_patterns():
        if p.message:
            seen.setdefault(p.message.strip(), None)
    return list(seen)


def captures(sig: Signature) -> set[str]:
    """Names of the facts a signature captures from the log."""
    names: set[str] = set()
    for p in sig.all_patterns():
        names.update(re.findall(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>", _pattern_text(p)))
    return names | {"rank"}


def _pattern_text(p: Pattern) -> str:
    return " ".join((p.regex, *p.near))


# --- text -------------------------------------------------------------------------------------

_CODE_SPAN = re.compile(r"`([^`\n]{1,300})`")
_PLACEHOLDER = re.compile(r"\{([a-z][a-z0-9_]*)\}")
_ENTRY_ID = re.compile(r"(?<![\w./-])[a-z0-9_]+(?:\.[a-z0-9_]+)+(?![\w/-]|\.\w)")  # e.g. cuda.oom_fragmentation
_URL = re.compile(r"https?://\S+$")
EntryLink = Callable[[str], str | None]  # an entry id -> its link, or None when it is not an entry


def inline(text: str, facts: frozenset[str] | set[str] = frozenset(), *, link: EntryLink | None = None) -> Markup:
    """Escape text; entry ids become links (when `link` knows them); `code spans` become <code>;
    {fact} placeholders become <var>."""
    html = str(escape(" ".join(text.split())))
    if link is not None:
        html = _ENTRY_ID.sub(lambda m: f'<a href="{href}">{m[0]}</a>' if (href := link(m[0])) else m[0], html)
    html = _CODE_SPAN.sub(lambda m: f"<code>{m[1]}</code>", html)
    if facts:
        html = _PLACEHOLDER.sub(lambda m: f"<var>{m[1]}</var>" if m[1] in facts else m[0], html)
    return Markup(html)


def paragraphs(text: str, *, link: EntryLink | None = None) -> Markup:
    """Blank-line separated paragraphs, each rendered inline."""
    parts = [p for p in re.split(r"\n\s*\n", text.strip()) if p.strip()]
    return Markup("\n").join(Markup("<p>{}</p>").format(inline(p, link=link)) for p in parts)


def plain(text: str, limit: int | None = None) -> str:
    """Text without markup, on one line, cut at a word boundary under `limit` characters."""
    flat = " ".join(text.replace("`", "").split())
    if limit is None or len(flat) <= limit:
        return flat
    cut = flat[: limit - 1].rsplit(" ", 1)[0].rstrip(",;:.")
    return cut + "…"


def first_sentence(text: str, limit: int = 200) -> str:
    """The first sentence of a text, for lists."""
    flat = plain(text)
    match = re.search(r"(?<=[.!?])\s+(?=[A-Z(])", flat)
    return plain(flat[: match.start()] if match else flat, limit)


class Highlighter:
    """Server-side syntax highlighting with Pygments (CSS classes under `.highlight`); lexers looked up once."""

    def __init__(self) -> None:
        self.formatter = HtmlFormatter(cssclass="highlight", wrapcode=True)
        self.lexers: dict[str, Lexer] = {}

    def lexer(self, language: str) -> Lexer:
        key = language.lower()
        if key not in self.lexers:
            try:
                self.lexers[key] = get_lexer_by_name(key, stripnl=False)
            except ClassNotFound:
                self.lexers[key] = TextLexer(stripnl=False)
        return self.lexers[key]

    def __call__(self, code: str, language: str) -> Markup:
        return Markup(pygments.highlight(code.rstrip("\n") + "\n", self.lexer(language), self.formatter))


def json_ld(data: Mapping[str, Any]) -> Markup:
    """JSON for a <script type="application/ld+json"> block, safe against `</script>` in the text."""
    text = json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    return Markup(text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026"))


# --- relations --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Related:
    """How one entry connects to others."""

    caused_by: tuple[Signature, ...]  # its `consequence_of`: what it is usually an echo of
    causes: tuple[Signature, ...]  # entries that name it in their `consequence_of`
    see_also: tuple[Signature, ...]  # its `related`, then entries whose `related` names it
    shared_tags: tuple[tuple[Signature, tuple[str, ...]], ...]  # entries with the rarest tags in common

    def __bool__(self) -> bool:
        return bool(self.caused_by or self.causes or self.see_also or self.shared_tags)


SHARED_TAG_LIMIT = 6


def relations(library: Library) -> dict[str, Related]:
    """Every entry's related entries, computed once for the library."""
    sigs = library.signatures
    by_tag: dict[str, list[str]] = defaultdict(list)
    for sig in sigs.values():
        for tag in sig.tags:
            by_tag[tag].append(sig.id)
    causes: dict[str, list[str]] = defaultdict(list)
    backlinks: dict[str, list[str]] = defaultdict(list)
    for sig in sigs.values():
        for other in sig.consequence_of:
            causes[other].append(sig.id)
        for other in sig.related:
            backlinks[other].append(sig.id)
    out = {}
    for sig in sigs.values():
        caused_by = [i for i in sig.consequence_of if i in sigs and i != sig.id]
        effects = sorted(i for i in causes[sig.id] if i != sig.id)
        see_also = list(dict.fromkeys(i for i in (*sig.related, *sorted(backlinks[sig.id])) if i in sigs))
        see_also = [i for i in see_also if i != sig.id and i not in caused_by and i not in effects]
        shown = {sig.id, *caused_by, *effects, *see_also}
        scores: dict[str, float] = defaultdict(float)
        common: dict[str, list[str]] = defaultdict(list)
        for tag in sig.tags:
            for other in by_tag[tag]:
                if other not in shown:
                    scores[other] += 1 / math.log(1 + len(by_tag[tag]))  # rare tags say more
                    common[other].append(tag)
        best = sorted(scores, key=lambda i: (-scores[i], i))[:SHARED_TAG_LIMIT]
        out[sig.id] = Related(
            caused_by=tuple(sigs[i] for i in caused_by),
            causes=tuple(sigs[i] for i in effects),
            see_also=tuple(sigs[i] for i in see_also),
            shared_tags=tuple((sigs[i], tuple(common[i])) for i in best),
        )
    return out


def tags(library: Library) -> dict[str, list[Signature]]:
    """Entries per tag, tags and entries sorted."""
    out: dict[str, list[Signature]] = defaultdict(list)
    for sig in library.signatures.values():
        for tag in sig.tags:
            out[tag].append(sig)
    return {t: sorted(out[t], key=lambda s: s.title.lower()) for t in sorted(out)}


def layers(library: Library) -> list[tuple[str, list[Signature]]]:
    """Entries grouped by layer, layers in reading order, entries by title."""
    out: dict[str, list[Signature]] = defaultdict(list)
    for sig in library.signatures.values():
        out[sig.layer].append(sig)
    return [(layer, sorted(out[layer], key=lambda s: s.title.lower())) for layer in sorted(out, key=layer_order)]


# --- structured data --------------------------------------------------------------------------


def article_ld(sig: Signature, *, url: str | None, version: str) -> dict[str, Any]:
    """schema.org TechArticle for an entry."""
    data: dict[str, Any] = {
        "@context": "https://schema.org",
        "@type": "TechArticle",
        "headline": plain(sig.title, 110),
        "name": sig.title,
        "description": plain(sig.summary),
        "articleSection": layer_title(sig.layer),
        "keywords": ", ".join((*sig.tags, sig.id)),
        "identifier": sig.id,
        "version": version,
        "proficiencyLevel": "Expert",
        "inLanguage": "en",
        "publisher": {"@type": "Organization", "name": "Tracelore"},
        "citation": [{"@type": "CreativeWork", "name": r.title, "url": r.url} for r in sig.references],
    }
    if url:
        data["url"] = url
        data["mainEntityOfPage"] = {"@type": "WebPage", "@id": url}
    return data


def faq_ld(sig: Signature) -> dict[str, Any] | None:
    """schema.org FAQPage for an entry's FAQ, or None when it has none."""
    if not sig.faq:
        return None
    return {
        "@context": "https://schema.org",
        "@type": "FAQPage",
        "mainEntity": [
            {"@type": "Question", "name": plain(f.q), "acceptedAnswer": {"@type": "Answer", "text": plain(f.a)}}
            for f in sig.faq
        ],
    }
