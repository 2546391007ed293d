"""HTML pages: the paste/upload form and the diagnosis page. They work without JavaScript."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import FileResponse, PlainTextResponse, RedirectResponse, Response
from fastapi.templating import Jinja2Templates

from app.config import Settings
from app.errors import NotFound, TraceloreError
from app.jobs.retention import not_before
from app.quota.tiers import Usage
from app.store.diagnoses import get_diagnosis
from app.web.allowance import quota_upgrade, usage_for_page
from app.web.delete_cookie import remember_delete_token
from app.web.deps import MetricsDep, SessionDep, Sessions, SessionsDep, SettingsDep, SubjectDep
from app.web.diagnosis_service import diagnose_request
from app.web.diagnosis_view import diagnosis_context
from app.web.formback import FormBack, form_back
from app.web.identity import Subject
from app.web.metrics import Metrics
from app.web.state import state_of
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


@router.get("/d/{diagnosis_id}", name="diagnosis_page")
def diagnosis_page(request: Request, diagnosis_id: str, settings: SettingsDep, session: SessionDep) -> Response:
    """The permalink page of a stored diagnosis."""
    record = get_diagnosis(session, diagnosis_id, not_before=not_before(settings)) if len(diagnosis_id) <= 64 else None
    if record is None:
        raise NotFound(f"no diagnosis {diagnosis_id!r}: the link is wrong or the diagnosis has expired")
    templates: Jinja2Templates = state_of(request.app).templates
    return templates.TemplateResponse(request, "diagnosis.html", diagnosis_context(record))
