"""HTML pages: the paste/upload form and the diagnosis page. They work without JavaScript."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app.config import Settings
from app.core import Candidate, Diagnosis
from app.core.models import Window
from app.core.rendering import quiet_heading, trust, verdict_line
from app.core.stored import StoredDiagnosis
from app.errors import NotFound, TraceloreError
from app.jobs.retention import not_before
from app.quota.tiers import Usage
from app.store.diagnoses import get_diagnosis
from app.web.allowance import quota_upgrade, usage_for_page
from app.web.delete_cookie import remember_delete_token
from app.web.deps import MetricsDep, SessionDep, Sessions, SessionsDep, SettingsDep, SubjectDep
from app.web.diagnosis_service import diagnose_request
from app.web.formback import FormBack, form_back
from app.web.identity import Subject
from app.web.metrics import Metrics
from app.web.state import state_of
from app.web.timeline import job_picture
from app.web.upload import human_bytes
from app.web.urls import diagnosis_url

router = APIRouter()

SAMPLES_DIR = Path(__file__).resolve().parent / "samples"
STATIC_DIR = Path(__file__).resolve().parent / "static"


@dataclass(frozen=True)
class Sample:
    name: str
    title: str


SAMPLES = (
    Sample("ddp-cuda-oom", "8-GPU DDP run: CUDA out of memory on one rank, NCCL timeouts on the others"),
    Sample("oom-killed", "Host memory: the kernel OOM killer ends a data-loading worker"),
    Sample("torn-checkpoint", "Resume from a checkpoint that was cut short while saving"),
)
PREFILL_LIMIT = 1 << 20  # a rejected paste is echoed back into the form up to this size


def _sample_text(name: str) -> str:
    if name not in {s.name for s in SAMPLES}:
        raise NotFound(f"no sample {name!r}")
    return (SAMPLES_DIR / f"{name}.log").read_text(encoding="utf-8")


def _log_limit(usage: Usage | None, settings: Any) -> int:
    """The largest log this caller may send: their tier's, once their allowance is known."""
    return min(usage.tier.max_log_bytes, settings.max_upload_bytes) if usage else int(settings.max_upload_bytes)


def _home(
    request: Request,
    settings: Any,
    *,
    text: str = "",
    error: str | None = None,
    error_title: str | None = None,
    back: FormBack | None = None,
    status: int = 200,
    headers: dict[str, str] | None = None,
    subject: Subject | None = None,
    usage: Usage | None = None,
) -> Response:
    templates: Jinja2Templates = state_of(request.app).templates
    return templates.TemplateResponse(
        request,
        "home.html",
        {
            "samples": SAMPLES,
            "text": back.text if back else text,
            "error": error,
            "error_title": error_title,
            "back": back,
            "limit": human_bytes(_log_limit(usage, settings)),
            "retention_days": settings.retention_days,
            "store_log": settings.store_log,
            "context_lines": settings.context_lines,
            "quota": usage,
            "signed_in": subject.account if subject else None,
            "upgrade": quota_upgrade(request, usage),
        },
        status_code=status,
        headers=headers,
    )


@router.get("/", name="home")
def home(
    request: Request, settings: SettingsDep, sessions: SessionsDep, subject: SubjectDep, sample: str | None = None
) -> Response:
    """The paste box and file picker; `?sample=NAME` fills the box with a bundled log."""
    usage = usage_for_page(request, sessions, subject)  # the page says what is left today
    return _home(request, settings, text=_sample_text(sample) if sample else "", subject=subject, usage=usage)


@router.get("/favicon.ico", name="favicon")
def favicon() -> FileResponse:
    """The icon browsers ask for on every page, whatever the page's <link rel=icon> says."""
    return FileResponse(
        STATIC_DIR / "favicon.ico", media_type="image/x-icon", headers={"Cache-Control": "max-age=86400"}
    )


@router.get("/samples/{name}.log", name="sample_log")
def sample_log(name: str) -> PlainTextResponse:
    """A bundled sample log, as text."""
    return PlainTextResponse(_sample_text(name))


@router.post("/diagnose", name="diagnose_form")
async def diagnose_form(
    request: Request,
    settings: SettingsDep,
    metrics: MetricsDep,
    sessions: SessionsDep,
    subject: SubjectDep,
) -> Response:
    """The form's target: diagnose, store, and redirect to the permalink (303, so reload does not resubmit)."""
    try:  # the form always stores: its answer is the permalink
        record, usage = await diagnose_request(request, subject, body_may_refuse=False)
    except TraceloreError as exc:
        if exc.status == 503 or exc.status >= 500:
            raise
        return await _refused(request, exc, settings=settings, metrics=metrics, sessions=sessions, subject=subject)
    url = diagnosis_url(request, "diagnosis_page", record.permalink_id)
    response = RedirectResponse(url, status_code=303, headers=usage.headers())
    remember_delete_token(response, record, settings, secure=request.url.scheme == "https")
    return response


async def _refused(
    request: Request,
    exc: TraceloreError,
    *,
    settings: Settings,
    metrics: Metrics,
    sessions: Sessions,
    subject: Subject,
) -> Response:
    """The home page again with the refusal said and the pasted log kept: a refusal never empties the box."""
    metrics.rejection(exc.type.rsplit("/", 1)[-1])
    back = await form_back(request, cap=PREFILL_LIMIT)
    return _home(
        request,
        settings,
        error=exc.detail,
        error_title=exc.title,
        back=back,
        status=exc.status,
        headers=exc.headers,
        subject=subject,
        usage=await run_in_threadpool(usage_for_page, request, sessions, subject),
    )


@dataclass(frozen=True)
class TimelineEntry:
    time: datetime | None
    rank: int | None
    line: int
    candidate: Candidate
    file: str | None = None


def _timeline(diagnosis: Diagnosis) -> list[TimelineEntry]:
    """When each failure first appeared on each rank, in time (or line) order.

    On a failure's own rank the entry is the line its heading states: a traceback frame a few lines
    above it is part of the same occurrence, not an earlier one, and drawing it apart made the
    picture mark "the same failure again" before the failure itself.
    """
    first: dict[tuple[str, int | None], TimelineEntry] = {}
    for c in diagnosis.candidates:
        first[(c.id, c.rank)] = TimelineEntry(c.time, c.rank, c.line, c, c.file)
        for e in c.evidence:
            key = (c.id, e.rank)
            if e.rank == c.rank:
                continue
            if key not in first or e.line < first[key].line:
                first[key] = TimelineEntry(e.time or c.time, e.rank, e.line, c, e.file)
    entries = list(first.values())
    if all(e.time is not None for e in entries):
        entries.sort(key=lambda e: (_comparable(e.time) if e.time else datetime.min, e.line))
    else:
        entries.sort(key=lambda e: e.line)
    return entries[:60]


def _comparable(value: datetime) -> datetime:
    """Logs mix naive and zoned timestamps; compare them all as naive UTC."""
    return value if value.tzinfo is None else value.astimezone(UTC).replace(tzinfo=None)


def _context(windows: list[Window], candidate: Candidate) -> list[Window]:
    # By file and line: in a job of several files, line 20 of rank0.log is not line 20 of rank3.log.
    lines = {(e.file, e.line) for e in candidate.evidence}
    return [w for w in windows if any((w.file, wl.no) in lines for wl in w.lines)]


@dataclass(frozen=True)
class Context:
    """A candidate's log context on the page: the windows shown with it, and those shown earlier."""

    windows: list[Window]
    shown_with: list[Candidate]  # earlier candidates on the page that already show the rest


def _contexts(record: StoredDiagnosis, order: list[Candidate]) -> dict[int, Context]:
    """Each window of log context once on the page, with the first candidate (in page order) it belongs to.

    Echoes on many ranks share the lines around them: repeating the same window under each
    echo made the page long and said nothing new.
    """
    owner: dict[tuple[str | None, int], Candidate] = {}
    out: dict[int, Context] = {}
    for c in order:
        mine, elsewhere = [], []
        for w in _context(record.windows, c):
            key = (w.file, w.lines[0].no if w.lines else 0)
            if key in owner:
                if owner[key] not in elsewhere:
                    elsewhere.append(owner[key])
            else:
                owner[key] = c
                mine.append(w)
        out[id(c)] = Context(mine, elsewhere)
    return out


def ranks_text(ranks: list[int]) -> str:
    """Ranks as runs: [0, 1, 2, 3, 7] -> '0–3, 7'."""
    runs: list[list[int]] = []
    for r in sorted(set(ranks)):
        if runs and r == runs[-1][1] + 1:
            runs[-1][1] = r
        else:
            runs.append([r, r])
    return ", ".join(str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}–{b}" for a, b in runs)


def shown_ranks(candidate: Candidate) -> tuple[list[int], list[int]]:
    """The ranks whose lines the page shows for a candidate, and the ranks it was seen on without them.

    A candidate keeps a few evidence lines (one per pattern, then one per rank up to a cap), while
    `ranks` lists every rank it was seen on; the page names the two apart so that a rank it names
    with "lines on" is one whose line is there.
    """
    shown = sorted({e.rank for e in candidate.evidence if e.rank is not None})
    return shown, sorted(set(candidate.ranks) - set(shown))


def page_context(record: StoredDiagnosis) -> dict[str, Any]:
    """What diagnosis.html needs, grouped the way a person reads it."""
    d = record
    main, echoes, earlier = d.groups()
    timeline = _timeline(d)
    picture = job_picture(d, timeline)
    contexts = _contexts(record, [*main, *echoes, *earlier])
    return {
        "record": record,
        "d": d,
        "main": main,
        "echoes": echoes,
        "earlier": earlier,
        # A one-rank log drawn without times would repeat the cards: no timeline then.
        "timeline": timeline if picture is not None or len({(t.rank, t.file) for t in timeline}) > 1 else [],
        "picture": picture,
        "context_for": lambda c: contexts[id(c)] if id(c) in contexts else Context(_context(record.windows, c), []),
        "shown_ranks": shown_ranks,
        "ranks_text": ranks_text,
        "several_files": len(d.input.files) > 1,  # then every evidence line says which file it is from
        "verdict": verdict_line(d).removeprefix("Verdict: "),
        "trust": trust(d),
        "heading": quiet_heading(d),
    }


@router.get("/d/{diagnosis_id}", name="diagnosis_page")
def diagnosis_page(request: Request, diagnosis_id: str, settings: SettingsDep, session: SessionDep) -> Response:
    """The permalink page of a stored diagnosis."""
    record = get_diagnosis(session, diagnosis_id, not_before=not_before(settings)) if len(diagnosis_id) <= 64 else None
    if record is None:
        raise NotFound(f"no diagnosis {diagnosis_id!r}: the link is wrong or the diagnosis has expired")
    templates: Jinja2Templates = state_of(request.app).templates
    return templates.TemplateResponse(request, "diagnosis.html", page_context(record))
