"""Render the encyclopedia from a `Library`: for the service (root-absolute links) or as a static
site (links relative to each written page, so it can be hosted anywhere or opened from disk).

The same templates serve both; only `Links` differs.
"""

from __future__ import annotations

import contextlib
import os
import posixpath
import shutil
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from xml.sax.saxutils import escape as xml_escape

import jinja2

from app.core import Library
from app.core.engine import condition_words, template
from app.core.knowledge import Signature
from app.errors import BadInput, NotFound
from app.store.learning import EntryStats
from app.web import entries
from app.web.schemas import SignatureEntry
from app.web.search import MAX_QUERY, Results

STATIC_DIR = Path(__file__).resolve().parent / "static"
SITE_MARKER = ".tracelore-site"  # marks a folder written by build-site, so a rebuild may replace it


def location(kind: str, key: str = "") -> tuple[str, str]:
    """Where a page lives: (path on the service, file in a static site)."""
    match kind:
        case "index":
            return "/failures/", "failures/index.html"
        case "entry":
            return f"/failures/{key}", f"failures/{key}.html"
        case "tag":
            return f"/tags/{key}", f"tags/{key}.html"
        case "asset":
            return f"/static/{key}", f"static/{key}"
        case "entry_json":
            return f"/api/v1/signatures/{key}", f"api/v1/signatures/{key}.json"
        case "root":
            return "/", "index.html"
    raise ValueError(f"unknown page kind {kind!r}")


@dataclass(frozen=True)
class _Url:
    path: str  # what templates read: `url_for(...).path`


@dataclass(frozen=True)
class Links:
    """Links from one page. On the service (`here` is None) they are root-absolute paths;
    in a static site they are relative to the page's file `here`."""

    here: str | None = None
    service_url: str = ""  # static site: the diagnosis service for the paste form and search ('' = none)

    @property
    def static(self) -> bool:
        return self.here is not None

    def to(self, kind: str, key: str = "") -> str:
        """The link to a page or asset."""
        path, file = location(kind, key)
        if self.here is None:
            return path
        return posixpath.relpath(file, posixpath.dirname(self.here) or ".")

    def index(self) -> str:
        return self.to("index")

    def entry(self, sig_id: str) -> str:
        return self.to("entry", sig_id)

    def tag(self, tag: str) -> str:
        return self.to("tag", tag)

    def asset(self, path: str) -> str:
        return self.to("asset", path)

    def entry_json(self, sig_id: str) -> str:
        return self.to("entry_json", sig_id)

    def service(self, path: str) -> str | None:
        """A page of the diagnosis service (paste form, search), or None in a static site without one."""
        if self.here is None:
            return path
        return self.service_url.rstrip("/") + path if self.service_url else None

    def home(self) -> str:
        return self.service("/") or self.to("root")

    def url_for(self, name: str, /, **params: Any) -> _Url:
        """The `url_for` that base.html calls, answered without a request."""
        if name == "static":
            return _Url(self.asset(params["path"]))
        if name == "home":
            return _Url(self.home())
        if name == "failures_index":
            return _Url(self.index())
        raise KeyError(f"encyclopedia pages cannot link to route {name!r}")

    def absolute(self, base: str, kind: str, key: str = "") -> str:
        """The full address of a page under `base` (the service's or the static site's URL)."""
        path, file = location(kind, key)
        return base.rstrip("/") + (path if self.here is None else "/" + file)


class Site:
    """The encyclopedia of one library, rendered with one Jinja environment."""

    def __init__(self, library: Library, env: jinja2.Environment) -> None:
        self.library = library
        self.env = env
        self.related = entries.relations(library)
        self.tags = entries.tags(library)
        self.layers = entries.layers(library)
        self.highlight = entries.Highlighter()

    def signature(self, sig_id: str) -> Signature:
        """An entry by id, or NotFound."""
        sig = self.library.signatures.get(sig_id)
        if sig is None:
            raise NotFound(f"the encyclopedia has no entry {sig_id!r}; the index at /failures/ lists them all")
        return sig

    def tagged(self, tag: str) -> list[Signature]:
        """The entries with a tag, or NotFound."""
        if tag not in self.tags:
            raise NotFound(f"no entry has the tag {tag!r}; the index at /failures/ lists the tags")
        return self.tags[tag]

    def _render(self, template: str, links: Links, *, canonical: str | None, **context: Any) -> str:
        return self.env.get_template(template).render(
            links=links,
            url_for=links.url_for,
            static_site=links.static,
            service_url=links.service_url,
            canonical=canonical,
            library_version=self.library.version,
            total=len(self.library),
            layer_title=entries.layer_title,
            first_sentence=entries.first_sentence,
            **context,
        )

    def render_index(self, links: Links, *, base: str = "") -> str:
        """The index: every entry grouped by layer, with a filter box."""
        canonical = links.absolute(base, "index") if base else None
        return self._render(
            "failures_index.html",
            links,
            canonical=canonical,
            layers=self.layers,
            tags=self.tags,
            description=(
                f"{len(self.library)} failures of ML training runs, from CUDA out of memory to NCCL timeouts: "
                "what each error message means, its root causes and the fix."
            ),
        )

    def render_entry(self, sig_id: str, links: Links, *, base: str = "", seen: EntryStats | None = None) -> str:
        """One entry page, every section its signature file has (and what the service has seen of it)."""
        sig = self.signature(sig_id)
        canonical = links.absolute(base, "entry", sig.id) if base else None
        related = self.related[sig.id]
        present = [(a, h) for a, h, has in entries.SECTIONS if has(sig) and (a != "related" or related)]
        if links.static:  # no paste box on a static page: it shows how to diagnose instead
            present = [(a, "Diagnose your log" if a == "paste-log" else h) for a, h in present]
        jsonld = [entries.article_ld(sig, url=canonical, version=self.library.version), entries.faq_ld(sig)]
        facts = entries.captures(sig)
        command, explain = sig.verify_parts()

        def link(entry_id: str) -> str | None:  # ids named in the text link to their entries
            return links.entry(entry_id) if entry_id in self.library.signatures and entry_id != sig.id else None

        return self._render(
            "failure.html",
            links,
            canonical=canonical,
            sig=sig,
            # The fix, its check and the resume advice with every optional part, its facts as slots.
            fix=[(template(text), _condition(when)) for text, when in sig.steps()],
            verify_command=template(command) if command else None,
            verify_explain=template(explain),
            resume=template(sig.resume),
            sections=present,
            symptoms=entries.symptom_rows(sig),
            messages=entries.messages(sig),
            facts=facts,
            fact_names=sorted(facts - {"rank"}),
            related=related,
            jsonld=[entries.json_ld(d) for d in jsonld if d],
            description=entries.plain(sig.summary, 158),
            inline=lambda text, facts=frozenset(): entries.inline(text, facts, link=link),
            paragraphs=lambda text: entries.paragraphs(text, link=link),
            highlight_code=self.highlight,
            measured=self.library.measured.get(sig.id),
            seen=seen,
            excerpts=entries.excerpts(sig),
        )

    def render_tag(self, tag: str, links: Links, *, base: str = "") -> str:
        """The entries with one tag."""
        sigs = self.tagged(tag)
        canonical = links.absolute(base, "tag", tag) if base else None
        return self._render(
            "tag.html",
            links,
            canonical=canonical,
            tag=tag,
            sigs=sigs,
            description=f"Failures of ML training runs tagged {tag}: " + ", ".join(s.title for s in sigs[:6]),
        )

    def render_search(self, results: Results, links: Links, *, error: str | None = None) -> str:
        """The search page with its results (never cached: it depends on the query)."""
        return self._render(
            "search.html",
            links,
            canonical=None,
            results=results,
            error=error,
            max_query=MAX_QUERY,
            description="Search the failure encyclopedia by error message, traceback or words.",
        )

    def page_urls(self, links: Links, base: str) -> list[str]:
        """Every page's full address, for the sitemap."""
        urls = [links.absolute(base, "index")]
        urls += [links.absolute(base, "entry", i) for i in sorted(self.library.signatures)]
        urls += [links.absolute(base, "tag", t) for t in self.tags]
        return urls

    def sitemap(self, links: Links, base: str) -> str:
        """sitemaps.org XML of every encyclopedia page."""
        rows = "".join(f"  <url><loc>{xml_escape(u)}</loc></url>\n" for u in self.page_urls(links, base))
        return (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
            f"{rows}</urlset>\n"
        )


def robots(*, sitemap: str | None, disallow: Iterable[str] = ()) -> str:
    """robots.txt: crawl the encyclopedia, not private or infinite spaces."""
    lines = ["User-agent: *", *(f"Disallow: {p}" for p in disallow), "Allow: /"]
    if sitemap:
        lines.append(f"Sitemap: {sitemap}")
    return "\n".join(lines) + "\n"


# --- static export ----------------------------------------------------------------------------


def _files(site: Site, *, base_url: str, service_url: str) -> Mapping[str, str]:
    """Every file of the static site: path in the site -> content."""
    out: dict[str, str] = {}

    def links(here: str) -> Links:
        return Links(here=here, service_url=service_url)

    for kind in ("root", "index"):
        here = location(kind)[1]
        out[here] = site.render_index(links(here), base=base_url)
    for sig_id, sig in site.library.signatures.items():
        here = location("entry", sig_id)[1]
        out[here] = site.render_entry(sig_id, links(here), base=base_url)
        entry = SignatureEntry.of(sig, site.library)
        out[location("entry_json", sig_id)[1]] = entry.model_dump_json(indent=2) + "\n"
    for tag in site.tags:
        here = location("tag", tag)[1]
        out[here] = site.render_tag(tag, links(here), base=base_url)
    sitemap = None
    if base_url:
        sitemap = base_url.rstrip("/") + "/sitemap.xml"
        out["sitemap.xml"] = site.sitemap(links("index.html"), base_url)
    out["robots.txt"] = robots(sitemap=sitemap)
    return out


def check_output(out: Path) -> Path:
    """The folder a site may be written to: new, empty, or an earlier build (never someone's files)."""
    out = out.resolve()
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / SITE_MARKER).exists())):
        raise BadInput(f"{out} exists and is not an earlier build-site output; choose a new or empty folder")
    return out


def build_site(
    library: Library, env: jinja2.Environment, out: Path, *, base_url: str = "", service_url: str = ""
) -> int:
    """Write the encyclopedia as a static site into `out`; return the number of pages.

    `out` must be new, empty, or an earlier build (it is replaced whole, never merged).
    """
    out = check_output(out)
    site = Site(library, env)
    files = _files(site, base_url=base_url, service_url=service_url)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", dir=out.parent))
    with contextlib.ExitStack() as on_error:
        on_error.callback(shutil.rmtree, tmp, ignore_errors=True)
        for name, text in files.items():
            path = tmp / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        shutil.copytree(STATIC_DIR, tmp / "static", dirs_exist_ok=True)
        (tmp / SITE_MARKER).write_text(f"library {library.version}\n", encoding="utf-8")
        os.chmod(tmp, 0o755)  # mkdtemp makes it private; a site is for reading
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.old.", dir=out.parent))
            out.rename(old / "site")
            tmp.rename(out)
            shutil.rmtree(old)
        else:
            tmp.rename(out)
        on_error.pop_all()
    return sum(1 for name in files if name.endswith(".html"))


def _condition(when: Mapping[str, Sequence[str]]) -> str:
    """A fix step's condition as the entry page writes it before the step ('If the job runs under Slurm')."""
    if not when:
        return ""
    said = condition_words(when)
    return said[0].upper() + said[1:]
