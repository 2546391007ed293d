"""The failure encyclopedia on a real server and as a static site: every link resolves, every
entry page has every section its signature file has, and real error lines find the right entry."""

from __future__ import annotations

import json
import posixpath
import re
import shutil
import xml.etree.ElementTree as ET
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html import unescape
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlsplit

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import event

from app.cli import main
from app.core.knowledge.loading import Library, build_library, load_library
from app.core.knowledge.schema import Signature
from app.web.encyclopedia import Encyclopedia
from app.web.state import state_of
from app.web.templating import make_templates
from tests.conftest import database_for
from tests.support import LiveServer, live_server, make_settings

HTML = {"Accept": "text/html,application/xhtml+xml"}


# --- reading pages ----------------------------------------------------------------------------


@dataclass
class Page:
    """What a page links to and what it contains, as an HTML parser sees it."""

    links: list[tuple[str, str]] = field(default_factory=list)  # (tag.attr, value)
    ids: set[str] = field(default_factory=set)
    sections: list[str] = field(default_factory=list)  # ids of <section class="entry-section">, in order
    jsonld: list[dict] = field(default_factory=list)
    results: list[str] = field(default_factory=list)  # hrefs of search results, in order
    title: str = ""
    meta: dict[str, str] = field(default_factory=dict)
    canonical: str | None = None
    highlighted: int = 0  # Pygments blocks
    copyable: list[str] = field(default_factory=list)  # texts of <pre id="message-N">
    forms: list[dict[str, str]] = field(default_factory=list)


class _Parser(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.page = Page()
        self._capture: str | None = None
        self._buffer: list[str] = []
        self._in_result = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        for attr in ("href", "src"):
            if attr in a:
                self.page.links.append((f"{tag}.{attr}", a[attr]))
        if tag == "form":
            self.page.forms.append({"method": a.get("method", "get"), "action": a.get("action", "")})
        if "id" in a:
            self.page.ids.add(a["id"])
        classes = a.get("class", "").split()
        if tag == "section" and "entry-section" in classes:
            self.page.sections.append(a["id"])
        if tag == "div" and "highlight" in classes:
            self.page.highlighted += 1
        if tag == "li" and "result" in classes:
            self._in_result = True
        if tag == "a" and self._in_result:
            self.page.results.append(a["href"])
            self._in_result = False
        if tag == "meta" and "name" in a:
            self.page.meta[a["name"]] = a.get("content", "")
        if tag == "link" and a.get("rel") == "canonical":
            self.page.canonical = a["href"]
        if tag == "script" and a.get("type") == "application/ld+json":
            self._start("jsonld")
        if tag == "title":
            self._start("title")
        if tag == "pre" and a.get("id", "").startswith("message-"):
            self._start("message")

    def _start(self, what: str) -> None:
        self._capture, self._buffer = what, []

    def handle_data(self, data: str) -> None:
        if self._capture:
            self._buffer.append(data)

    def handle_endtag(self, tag: str) -> None:
        if self._capture and tag in ("script", "title", "pre"):
            text = "".join(self._buffer)
            if self._capture == "jsonld":
                self.page.jsonld.append(json.loads(text))
            elif self._capture == "title":
                self.page.title = text
            else:
                self.page.copyable.append(text)
            self._capture = None


def parse(html: str) -> Page:
    parser = _Parser()
    parser.feed(html)
    parser.close()
    return parser.page


# --- what a signature file promises -----------------------------------------------------------


def expected_sections(sig: Signature, library: Library) -> list[str]:
    """The sections an entry page must show, in order, from what its signature file has."""
    has_message = any(p.message for p in sig.all_patterns())
    related = bool(sig.related or sig.consequence_of) or any(
        sig.id in other.consequence_of or sig.id in other.related or set(sig.tags) & set(other.tags)
        for other in library.signatures.values()
        if other.id != sig.id
    )
    wanted = [
        ("quick-answer", True),
        ("symptoms", any(p.message or p.means for p in sig.all_patterns())),
        ("mechanism", True),
        ("root-causes", bool(sig.root_causes)),
        ("confirm", bool(sig.confirm)),
        ("fix", bool(sig.fix)),
        ("verify", True),
        ("resume", True),
        ("versions", bool(sig.applies_to or sig.version_notes)),
        ("dead-ends", bool(sig.dead_ends)),
        ("prevention", bool(sig.prevention)),
        ("code-examples", bool(sig.code_examples)),
        ("error-messages", has_message),
        ("references", bool(sig.references)),
        ("related", related),
        ("faq", bool(sig.faq)),
        ("paste-log", True),
    ]
    return [anchor for anchor, present in wanted if present]


def check_entry(sig: Signature, library: Library, html: str, page: Page, *, canonical: str | None) -> list[str]:
    """Everything wrong with one entry page (empty when it is complete)."""
    problems = []
    want = expected_sections(sig, library)
    if page.sections != want:
        problems.append(f"sections {page.sections} != {want}")
    if sig.title not in page.title:
        problems.append(f"<title> {page.title!r} lacks the title")
    first_words = " ".join(sig.summary.replace("`", "").split()[:6])
    if not page.meta.get("description", "").startswith(first_words):
        problems.append("meta description is not the summary")
    if page.canonical != canonical:
        problems.append(f"canonical {page.canonical!r} != {canonical!r}")
    types = [d.get("@type") for d in page.jsonld]
    if "TechArticle" not in types:
        problems.append("no TechArticle JSON-LD")
    faq = next((d for d in page.jsonld if d.get("@type") == "FAQPage"), None)
    if bool(sig.faq) != bool(faq) or (faq and len(faq["mainEntity"]) != len(sig.faq)):
        problems.append("FAQPage JSON-LD does not match the FAQ")
    if page.highlighted != len(sig.code_examples):
        problems.append(f"{page.highlighted} highlighted code blocks for {len(sig.code_examples)} examples")
    messages = list(dict.fromkeys(p.message.strip() for p in sig.all_patterns() if p.message))
    if page.copyable != messages:
        problems.append("the copyable error messages are not the signature's messages")
    hrefs = {v for _, v in page.links}
    missing_refs = [r.url for r in sig.references if r.url not in hrefs]
    if missing_refs:
        problems.append(f"references not linked: {missing_refs}")
    ranges = [r.reference for r in sig.applies_to.values()] + [n.reference for n in sig.version_notes]
    if [u for u in ranges if u not in hrefs]:
        problems.append("a version range's reference is not linked")
    linked = {posixpath.basename(urlsplit(v).path).removesuffix(".html") for _, v in page.links}
    for other in (*sig.related, *sig.consequence_of):
        if other in library.signatures and other not in linked:
            problems.append(f"related entry {other} not linked")
    for tag in sig.tags:
        if tag not in linked:
            problems.append(f"tag {tag} not linked")
    text = " ".join(unescape(re.sub(r"<[^>]+>", "", html)).split())
    for f in sig.faq:
        if " ".join(f.q.replace("`", "").split()) not in text:
            problems.append(f"FAQ question missing: {f.q[:40]}")
    return problems


# --- a real server ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The encyclopedia needs no database, but the paste-your-log form does: SQLite."""
    tmp = tmp_path_factory.mktemp("encyclopedia")
    with live_server(make_settings(database_for("sqlite", request, tmp), tmp), library) as live:
        yield live


@pytest.fixture
def web(server: LiveServer) -> Iterator[httpx.Client]:
    with server.client(headers=HTML) as c:
        yield c


def crawl(fetch: Callable[[str], tuple[int, str, str]], start: str, *, follow: Callable[[str], bool]) -> dict:
    """Fetch every link reachable from `start`; parse pages `follow` accepts. Returns pages and broken links."""
    seen: dict[str, tuple[int, str, str]] = {}
    parsed: dict[str, Page] = {}
    broken: list[str] = []
    fragments: list[tuple[str, str, str]] = []  # (from, target, fragment)
    queue = deque([start])
    while queue:
        url = queue.popleft()
        if url in seen:
            continue
        seen[url] = fetch(url)
        status, kind, body = seen[url]
        if status != 200:
            broken.append(f"{url}: {status}")
            continue
        if "html" not in kind or not follow(url):
            continue
        parsed[url] = parse(body)
        for _, value in parsed[url].links:
            target = urljoin(url, value)
            if not target.startswith(start.split("/failures/")[0]) and "://" in target:
                continue  # another site: references, the service in a static build
            base, _, fragment = target.partition("#")
            if fragment:
                fragments.append((url, base, unquote(fragment)))
            if base not in seen:
                queue.append(base)
    for source, target, fragment in fragments:
        status, kind, body = seen.get(target, (0, "", ""))
        if status == 200 and "html" in kind:
            if target not in parsed:
                parsed[target] = parse(body)
            if fragment not in parsed[target].ids:
                broken.append(f"{source} -> {target}#{fragment}: no such anchor")
    return {"pages": seen, "parsed": parsed, "broken": broken}


def test_crawl_finds_no_broken_link_and_every_section(server: LiveServer, library: Library) -> None:
    origin = server.url
    with server.client(headers=HTML) as c:

        def fetch(url: str) -> tuple[int, str, str]:
            r = c.get(url, follow_redirects=True)
            return r.status_code, r.headers.get("content-type", ""), r.text

        result = crawl(
            fetch, f"{origin}/failures/", follow=lambda u: urlsplit(u).path.startswith(("/failures/", "/tags/"))
        )
    assert result["broken"] == []
    pages = result["pages"]
    entries = {urlsplit(u).path.removeprefix("/failures/") for u in pages if urlsplit(u).path.startswith("/failures/")}
    assert set(library.signatures) <= entries, "every entry is reachable from the index"
    tags = {t for s in library.signatures.values() for t in s.tags}
    assert {f"{origin}/tags/{t}" for t in tags} <= set(pages), "every tag page is reachable"
    assert {f"{origin}/api/v1/signatures/{i}" for i in library.signatures} <= set(pages), "each entry links its JSON"
    problems = {}
    for sig in library.signatures.values():
        url = f"{origin}/failures/{sig.id}"
        problems[sig.id] = check_entry(sig, library, pages[url][2], result["parsed"][url], canonical=url)
    assert {k: v for k, v in problems.items() if v} == {}


def test_index_groups_every_entry_by_layer_with_counts(web: httpx.Client, library: Library) -> None:
    html = web.get("/failures/").text
    for layer in {s.layer for s in library.signatures.values()}:
        count = sum(1 for s in library.signatures.values() if s.layer == layer)
        section = re.search(rf'<section class="layer" id="layer-{layer}".*?</section>', html, re.S)
        assert section, layer
        assert f'<span class="count" data-count>{count}</span>' in section.group(0)
        assert section.group(0).count('<li data-filter="') == count
    page = parse(html)
    assert 'id="filter"' in html and {"method": "get", "action": "/search"} in page.forms
    assert page.canonical == f"{web.base_url}/failures/".replace("//failures", "/failures")
    assert str(len(library)) in page.meta["description"]


def test_entry_page_is_cached_and_needs_no_database(server: LiveServer, web: httpx.Client) -> None:
    statements: list[str] = []

    def count(conn: object, cursor: object, statement: str, *args: object) -> None:
        statements.append(statement)

    event.listen(state_of(server.app).engine, "before_cursor_execute", count)
    try:
        first = web.get("/failures/storage.disk_full")
        again = web.get("/failures/storage.disk_full", headers={"If-None-Match": first.headers["etag"]})
        tag = web.get("/tags/redis")
        head = web.head("/failures/storage.disk_full")
    finally:
        event.remove(state_of(server.app).engine, "before_cursor_execute", count)
    assert first.status_code == 200 and again.status_code == 304 and tag.status_code == 200
    assert head.status_code == 200 and head.content == b"" and head.headers["etag"] == first.headers["etag"]
    assert statements == []
    assert "max-age" in first.headers["cache-control"]


def test_an_entry_shows_every_fix_step_with_its_condition_and_copies_only_the_command(web: httpx.Client) -> None:
    """No log here: every step is shown, a conditioned one with its condition written out; the
    copy box holds the verify command, its explanation beside it; a check in words gets no box."""
    html = web.get("/failures/storage.disk_full").text
    fix = html.split('<ol class="fix">', 1)[1].split("</ol>", 1)[0]
    assert fix.count("<li>") == 8
    assert '<li><span class="when">If the job uses Lightning:</span> Set ModelCheckpoint(' in fix
    assert '<span class="when">If the job uses DeepSpeed:</span>' in fix
    box = re.search(r'<pre id="verify-command"><code>(.*?)</code></pre>', html, re.S)
    assert box is not None and box[1] == "df -h &lt;output_dir&gt; &lt;cache_dir&gt; /tmp"
    assert '<p class="verify-explain">shows room for at least two checkpoints' in html
    prose = web.get("/failures/host.oom_killed").text
    assert 'id="verify-command"' not in prose and "free -h -s 5" in prose


def test_unknown_entries_and_tags_are_clear_404s(web: httpx.Client) -> None:
    page = web.get("/failures/no.such_entry")
    assert page.status_code == 404 and "no.such_entry" in page.text and "text/html" in page.headers["content-type"]
    problem = web.get("/failures/no.such_entry", headers={"Accept": "application/json"})
    assert problem.status_code == 404 and problem.headers["content-type"] == "application/problem+json"
    assert web.get("/tags/no_such_tag").status_code == 404
    assert web.get("/failures", follow_redirects=True).url.path == "/failures/"
    moved = web.get("/failures/cuda.oom.html", follow_redirects=False)  # a link copied from a static build
    assert moved.status_code == 301 and moved.headers["location"] == "/failures/cuda.oom"


def test_sitemap_and_robots(web: httpx.Client, library: Library) -> None:
    sitemap = web.get("/sitemap.xml")
    assert sitemap.status_code == 200 and "xml" in sitemap.headers["content-type"]
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9"}
    locs = [e.text for e in ET.fromstring(sitemap.content).findall("s:url/s:loc", ns)]
    base = str(web.base_url).rstrip("/")
    assert f"{base}/failures/" in locs
    assert {f"{base}/failures/{i}" for i in library.signatures} <= set(locs)
    assert len(locs) == len(set(locs))
    robots = web.get("/robots.txt").text
    assert f"Sitemap: {base}/sitemap.xml" in robots
    assert "Disallow: /d/" in robots and "Disallow: /search" in robots


def test_base_url_makes_canonical_links(
    request: pytest.FixtureRequest, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> None:
    tmp = tmp_path_factory.mktemp("canonical")
    settings = make_settings(database_for("sqlite", request, tmp), tmp, base_url="https://tracelore.example/")
    with live_server(settings, library) as live, live.client() as c:
        page = parse(c.get("/failures/cuda.oom").text)
        sitemap = c.get("/sitemap.xml").text
    assert page.canonical == "https://tracelore.example/failures/cuda.oom"
    article = next(d for d in page.jsonld if d["@type"] == "TechArticle")
    assert article["url"] == page.canonical and article["headline"] == "CUDA out of memory"
    assert "<loc>https://tracelore.example/tags/cuda</loc>" in sitemap


def test_paste_your_log_on_an_entry_posts_to_the_diagnosis(web: httpx.Client, library: Library) -> None:
    sig = library.signatures["nccl.watchdog_timeout"]
    page = parse(web.get(f"/failures/{sig.id}").text)
    form = next(f for f in page.forms if f["method"] == "post")
    assert form["action"] == "/diagnose"
    r = web.post(form["action"], files={"log": (None, sig.examples.match[0].log)}, follow_redirects=False)
    assert r.status_code == 303 and urlsplit(r.headers["location"]).path.startswith("/d/")
    diagnosis = web.get(r.headers["location"]).text
    assert sig.title in diagnosis and f'href="/failures/{sig.id}"' in diagnosis


# --- search -----------------------------------------------------------------------------------

REDIS_TRACEBACK = """\
Traceback (most recent call last):
  File "/app/worker.py", line 41, in load_batch
    payload = r.get(key)
  File "/usr/local/lib/python3.11/site-packages/redis/commands/core.py", line 1829, in get
    return self.execute_command("GET", name, keys=[name])
  File "/usr/local/lib/python3.11/site-packages/redis/client.py", line 559, in execute_command
    return self._execute_command(*args, **options)
  File "/usr/local/lib/python3.11/site-packages/redis/_parsers/resp2.py", line 15, in read_response
    result = self._read_response(disable_decoding=disable_decoding)
  File "/usr/local/lib/python3.11/site-packages/redis/_parsers/encoders.py", line 43, in decode
    value = value.decode(self.encoding, self.encoding_errors)
UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 0: invalid start byte
"""


@pytest.mark.parametrize(
    ("query", "entry", "how"),
    [
        ("RuntimeError: CUDA error: device-side assert triggered", "cuda.device_side_assert", "matched"),
        (
            "[rank3]:[E1016 03:31:38.928463388 ProcessGroupNCCL.cpp:607] [Rank 3] Watchdog caught collective "
            "operation timeout: WorkNCCL(SeqNum=1234, OpType=ALLREDUCE, NumelIn=8192, NumelOut=8192, "
            "Timeout(ms)=600000) ran for 600123 milliseconds before timing out.",
            "nccl.watchdog_timeout",
            "matched",
        ),
        (REDIS_TRACEBACK, "redis.binary_decode", "matched"),
        # The bare line could come from anything; the words still lead to the one entry that has it.
        ("UnicodeDecodeError: 'utf-8' codec can't decode byte 0x80 in position 0", "redis.binary_decode", None),
        ("torch.OutOfMemoryError: CUDA out of memroy", "cuda.oom", None),  # typo in a real line
        ("CUDA out of memroy", "cuda.oom", None),
        ("devise-side asert triggerd", "cuda.device_side_assert", None),
        ("NCCL watchdog timout", "nccl.watchdog_timeout", None),
        ("Watchdog caught collective operation", "nccl.watchdog_timeout", None),  # a partial message
        ("codec can't decode byte", "redis.binary_decode", None),
        ("no space left on device", "storage.disk_full", None),
    ],
)
def test_search_finds_the_right_entry_first(web: httpx.Client, query: str, entry: str, how: str | None) -> None:
    r = web.get("/search", params={"q": query})
    assert r.status_code == 200
    page = parse(r.text)
    assert page.results, f"nothing found for {query!r}"
    assert page.results[0] == f"/failures/{entry}", page.results[:3]
    if how == "matched":
        assert re.search(r'<li class="result matched">\s*<a href="/failures/' + re.escape(entry), r.text)
    assert page.meta.get("robots") == "noindex"


def test_a_recognised_error_line_finds_its_entry_and_few_others(web: httpx.Client) -> None:
    line = "RuntimeError: CUDA error: an illegal memory access was encountered"
    page = parse(web.get("/search", params={"q": line}).text)
    assert page.results[0] == "/failures/cuda.illegal_memory_access"
    # Not every entry that shares "error" or "memory" with it: only the relatives its entry names.
    related = {"cuda.device_side_assert", "gpu.hardware_xid", "nccl.unhandled_cuda_error", "compile.dynamo_failure"}
    related |= {"env.extension_abi_mismatch", "env.flash_attention_unsupported"}
    assert 1 < len(page.results) <= 5, page.results
    assert {r.removeprefix("/failures/") for r in page.results[1:]} <= related, page.results


def test_stop_words_are_never_shown_as_search_words(web: httpx.Client) -> None:
    html = web.get("/search", params={"q": "the process was killed by the kernel and it is out of memory"}).text
    shown = {w.strip() for line in re.findall(r"Words: ([^<]+)", html) for w in line.split(",")}
    assert shown and {"killed", "memory"} & shown
    assert not shown & {"the", "was", "by", "and", "it", "is", "of"}, shown


def test_search_form_and_bad_queries(web: httpx.Client) -> None:
    empty = web.get("/search")
    assert empty.status_code == 200 and 'name="q"' in empty.text and "entries found" not in empty.text
    nothing = web.get("/search", params={"q": "zzzz qqqq"})
    assert nothing.status_code == 200 and "Nothing in the encyclopedia matches" in nothing.text
    odd = web.get("/search", params={"q": "\x00\x1b[31m\ufffd <script>alert(1)</script>\n\n"})
    assert odd.status_code == 200 and "<script>alert(1)" not in odd.text
    long = web.get("/search", params={"q": "a" * 8001})
    assert long.status_code == 400 and "at most 8,000" in long.text
    found = parse(web.get("/search", params={"q": "CUDA out of memory"}).text)
    assert {"method": "post", "action": "/diagnose"} in found.forms  # diagnose the text as a log


# --- static site ------------------------------------------------------------------------------


def check_static_site(out: Path, library: Library, *, service: str | None, base: str | None = None) -> None:
    """The same checks as the crawl, read from disk: every relative link is a file, every anchor exists."""

    def fetch(url: str) -> tuple[int, str, str]:
        path = out / urlsplit(url).path.removeprefix("/site/")
        if not path.is_file():
            return 404, "", ""
        return 200, "html" if path.suffix == ".html" else path.suffix, path.read_text(encoding="utf-8")

    origin = "file:///site"
    result = crawl(fetch, f"{origin}/failures/index.html", follow=lambda u: u.endswith(".html"))
    assert result["broken"] == []
    pages = result["pages"]
    assert fetch(f"{origin}/index.html")[0] == 200
    for sig in library.signatures.values():
        url = f"{origin}/failures/{sig.id}.html"
        assert url in pages, f"{sig.id} is not reachable"
        canonical = f"{base}/failures/{sig.id}.html" if base else None
        assert check_entry(sig, library, pages[url][2], result["parsed"][url], canonical=canonical) == []
        assert json.loads(pages[f"{origin}/api/v1/signatures/{sig.id}.json"][2])["id"] == sig.id
    for path in out.rglob("*.html"):
        page = parse(path.read_text(encoding="utf-8"))
        assert [v for _, v in page.links if v.startswith("/")] == [], f"{path}: links must be relative"
        # The service refuses forms posted from other sites: a static page links to it instead.
        assert not any(f["method"] == "post" for f in page.forms), path
    entry = (out / "failures" / "cuda.oom.html").read_text(encoding="utf-8")
    if service:
        assert f"{service}/" in {v for _, v in parse(entry).links}
    else:
        assert "Diagnose a log" not in entry and "tracelore diagnose train.log" in entry


def test_build_site_passes_the_link_check_from_disk(tmp_path: Path, signatures_dir: Path, library: Library) -> None:
    out = tmp_path / "site"
    args = ["--base-url", "https://docs.example/encyclopedia", "--service-url", "https://tracelore.example"]
    result = CliRunner().invoke(main, ["build-site", str(out), "--signatures", str(signatures_dir), *args])
    assert result.exit_code == 0, result.output
    assert f"for {len(library)} entries" in result.output
    check_static_site(out, library, service="https://tracelore.example", base="https://docs.example/encyclopedia")
    page = parse((out / "failures" / "cuda.oom.html").read_text())
    assert page.canonical == "https://docs.example/encyclopedia/failures/cuda.oom.html"
    index = parse((out / "failures" / "index.html").read_text())
    assert {"method": "get", "action": "https://tracelore.example/search"} in index.forms
    sitemap = (out / "sitemap.xml").read_text()
    assert "<loc>https://docs.example/encyclopedia/failures/cuda.oom.html</loc>" in sitemap
    assert "Sitemap: https://docs.example/encyclopedia/sitemap.xml" in (out / "robots.txt").read_text()
    assert (out / "static" / "encyclopedia.css").is_file() and (out / "static" / "tracelore.css").is_file()


def test_build_site_without_a_service_and_a_rebuild(tmp_path: Path, signatures_dir: Path) -> None:
    small = tmp_path / "signatures"
    for sig_id in ("cuda.oom", "cuda.oom_fragmentation", "host.oom_killed"):
        source = next(signatures_dir.rglob(f"{sig_id}.yaml"))
        (small / source.parent.name).mkdir(parents=True, exist_ok=True)
        shutil.copy(source, small / source.parent.name / source.name)
    library = load_library(small)
    out = tmp_path / "site"
    runner = CliRunner()
    result = runner.invoke(main, ["build-site", str(out), "--signatures", str(small), "--service-url", ""])
    assert result.exit_code == 0, result.output
    check_static_site(out, library, service=None)
    assert not (out / "sitemap.xml").exists()  # a sitemap needs absolute URLs: only with --base-url
    assert "Sitemap" not in (out / "robots.txt").read_text()
    # A rebuild replaces the earlier output whole.
    (out / "failures" / "stale.html").write_text("old")
    result = runner.invoke(main, ["build-site", str(out), "--signatures", str(small), "--service-url", ""])
    assert result.exit_code == 0, result.output
    assert not (out / "failures" / "stale.html").exists() and (out / "failures" / "cuda.oom.html").is_file()


def test_build_site_refuses_a_folder_it_did_not_write(tmp_path: Path, signatures_dir: Path) -> None:
    (tmp_path / "notes.txt").write_text("mine")
    result = CliRunner().invoke(main, ["build-site", str(tmp_path), "--signatures", str(signatures_dir)])
    assert result.exit_code == 2 and "not an earlier build-site output" in result.output
    assert (tmp_path / "notes.txt").read_text() == "mine"
    bad = CliRunner().invoke(main, ["build-site", str(tmp_path / "x"), "--base-url", "docs.example"])
    assert bad.exit_code == 2 and "http(s) URL" in bad.output


def test_each_app_renders_its_own_library(
    request: pytest.FixtureRequest, server: LiveServer, library: Library, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Pages are cached per app, not per process: an app with a one-entry library shows one entry."""
    small = build_library([library.signatures["cuda.oom"]])
    tmp = tmp_path_factory.mktemp("small")
    with live_server(make_settings(database_for("sqlite", request, tmp), tmp), small) as live, live.client() as c:
        index = c.get("/failures/").text
        assert index.count('<li data-filter="') == 1
        assert c.get("/failures/cuda.device_side_assert").status_code == 404
        assert "/failures/cuda.device_side_assert" not in c.get("/search", params={"q": "device-side assert"}).text
    with server.client() as c:
        assert c.get("/failures/").text.count('<li data-filter="') == len(library)


def test_the_page_cache_is_bounded(library: Library) -> None:
    encyclopedia = Encyclopedia(library, make_templates().env)
    rendered: list[str] = []

    def render(key: str) -> str:
        rendered.append(key)
        return key

    for i in range(encyclopedia.cache_limit + 10):  # e.g. one page under many Host names
        encyclopedia.page(("entry", "cuda.oom", f"http://host{i}"), lambda i=i: render(str(i)))
    assert encyclopedia.page(("entry", "cuda.oom", "http://host0"), lambda: render("again")).body == "again"
    last = f"http://host{encyclopedia.cache_limit + 9}"
    assert encyclopedia.page(("entry", "cuda.oom", last), lambda: render("never")).body != "never"


def test_cacheable_pages_carry_no_per_browser_cookie(server: LiveServer) -> None:
    # A shared cache keeps public entry pages; a Set-Cookie on them would reach every visitor.
    with server.client(headers=HTML) as fresh:
        entry = fresh.get("/failures/cuda.oom")
        assert entry.status_code == 200 and "public" in entry.headers["cache-control"]
        assert "set-cookie" not in entry.headers
        home = fresh.get("/")
        assert "set-cookie" in home.headers  # pages with forms still get the CSRF cookie
