"""The JSON API under /api/v1."""

from __future__ import annotations

import hmac
import zlib
from collections.abc import Iterator
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from fastapi.responses import PlainTextResponse, StreamingResponse
from sqlalchemy import text

from app.config import Settings
from app.core.knowledge import Signature
from app.core.models import Window, entry_path
from app.core.stored import StoredDiagnosis
from app.errors import Forbidden, NotFound, NotReady, Unauthorized
from app.jobs.retention import not_before
from app.quota.tiers import Usage
from app.store.diagnoses import get_diagnosis, get_log
from app.web.deps import LibraryDep, MetricsDep, SessionDep, SettingsDep, SubjectDep
from app.web.diagnosis_service import diagnose_request
from app.web.problems import PROBLEM_JSON
from app.web.schemas import SignatureEntry, SignatureSummary, Status
from app.web.state import state_of
from app.web.urls import diagnosis_url, with_url

router = APIRouter()

_PROBLEM: dict[str, Any] = {"content": {PROBLEM_JSON: {}}}
_UPLOAD_BODY: dict[str, Any] = {
    "requestBody": {
        "required": True,
        "description": (
            "The log: raw text, gzip, JSON or a multipart file. `Content-Encoding: gzip` is accepted. "
            "Several logs of one job: repeat the `file` part, or send a .tar.gz of them (as a part or as "
            "application/gzip)."
        ),
        "content": {
            "text/plain": {"schema": {"type": "string"}},
            "application/gzip": {"schema": {"type": "string", "format": "binary"}},
            "application/json": {
                "schema": {
                    "type": "object",
                    "required": ["log"],
                    "additionalProperties": False,
                    "properties": {
                        "log": {"type": "string"},
                        "store": {"type": "boolean", "default": True},
                        "top": {"type": "integer", "minimum": 1, "maximum": 100},
                    },
                }
            },
            "multipart/form-data": {
                "schema": {
                    "type": "object",
                    "properties": {
                        "file": {"type": "string", "format": "binary"},
                        "log": {"type": "string"},
                        "store": {"type": "boolean"},
                        "top": {"type": "integer"},
                    },
                }
            },
        },
    }
}


@router.post(
    "/diagnoses",
    status_code=201,
    response_model=StoredDiagnosis,
    openapi_extra=_UPLOAD_BODY,
    responses={
        200: {"description": "Diagnosed, not stored (`store=false`)", "model": StoredDiagnosis},
        400: _PROBLEM,
        401: _PROBLEM,
        413: _PROBLEM,
        415: _PROBLEM,
        422: _PROBLEM,
        429: _PROBLEM,
        503: _PROBLEM,
    },
)
async def create_diagnosis(
    request: Request,
    subject: SubjectDep,
    store: Annotated[bool | None, Query(description="keep a permalink (default true)")] = None,
    top: Annotated[int | None, Query(ge=1, le=100, description="at most this many candidates")] = None,
) -> Response:
    """Diagnose a log; with `store` (the default) keep it and return its permalink."""
    record, usage = await diagnose_request(request, subject, top=top, store=store)
    return _answer(request, state_of(request.app).settings, record, usage)


def _answer(request: Request, settings: Settings, record: StoredDiagnosis, usage: Usage) -> Response:
    """The diagnosis as JSON: 201 with its permalink and delete token once stored, else 200."""
    if record.id is None:  # not stored
        return diagnosis_json(record, headers=usage.headers())
    headers = {"Location": diagnosis_url(request, "read_diagnosis", record.id), **usage.headers()}
    if record.delete_token:  # shown once; only its hash is stored
        headers["X-Delete-Token"] = record.delete_token
    return diagnosis_json(with_url(request, settings, record), status_code=201, headers=headers)


def diagnosis_json(
    record: StoredDiagnosis, *, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    """A diagnosis as the API's JSON, serialised once by pydantic (the route's response_model documents it).

    Returned as it is, it skips FastAPI's validation of the model against itself and its
    dict-then-json.dumps encoding: a diagnosis is a large tree, and that was a third of a request.
    """
    return Response(record.model_dump_json(), status_code=status_code, media_type="application/json", headers=headers)


def _load(session: SessionDep, settings: Settings, diagnosis_id: str) -> StoredDiagnosis:
    record = get_diagnosis(session, diagnosis_id, not_before=not_before(settings)) if len(diagnosis_id) <= 64 else None
    if record is None:
        raise NotFound(f"no diagnosis {diagnosis_id!r}: the id is wrong or the diagnosis has expired")
    return record


@router.get("/diagnoses/{diagnosis_id}", response_model=StoredDiagnosis, responses={404: _PROBLEM})
def read_diagnosis(diagnosis_id: str, request: Request, settings: SettingsDep, session: SessionDep) -> Response:
    """A stored diagnosis."""
    return diagnosis_json(with_url(request, settings, _load(session, settings, diagnosis_id)))


@router.get("/diagnoses/{diagnosis_id}/windows", response_model=list[Window], responses={404: _PROBLEM})
def read_windows(diagnosis_id: str, settings: SettingsDep, session: SessionDep) -> list[Window]:
    """The log lines kept around the evidence of a stored diagnosis."""
    return _load(session, settings, diagnosis_id).windows


@router.get(
    "/diagnoses/{diagnosis_id}/log",
    response_class=PlainTextResponse,
    responses={404: _PROBLEM, 200: {"content": {"text/plain": {}}}},
)
def read_log(diagnosis_id: str, settings: SettingsDep, session: SessionDep) -> StreamingResponse:
    """The whole log, when the server keeps logs (`TRACELORE_STORE_LOG`)."""
    packed = get_log(session, diagnosis_id, not_before=not_before(settings)) if len(diagnosis_id) <= 64 else None
    if packed is None:
        raise NotFound(f"no log kept for diagnosis {diagnosis_id!r}; this server keeps only the evidence windows")

    def unpack() -> Iterator[bytes]:
        d = zlib.decompressobj(wbits=31)
        buf = packed
        while buf:
            yield d.decompress(buf, 1 << 20)
            buf = d.unconsumed_tail

    return StreamingResponse(unpack(), media_type="text/plain; charset=utf-8")


def _summary(request: Request, sig: Signature) -> SignatureSummary:
    return SignatureSummary(
        id=sig.id,
        title=sig.title,
        layer=sig.layer,
        severity=sig.severity,
        role=sig.role,
        tags=list(sig.tags),
        summary=sig.summary,
        path=entry_path(sig.id),
        url=str(request.url_for("read_signature", signature_id=sig.id)),
    )


@router.get("/signatures", response_model=list[SignatureSummary])
def list_signatures(request: Request, library: LibraryDep) -> list[SignatureSummary]:
    """Every failure class the library knows."""
    return [_summary(request, sig) for sig in library.signatures.values()]


@router.get("/signatures/{signature_id}", response_model=SignatureEntry, responses={404: _PROBLEM})
def read_signature(signature_id: str, library: LibraryDep) -> SignatureEntry:
    """One failure class: its patterns, what to do about it, and how often the corpus found it right."""
    sig = library.signatures.get(signature_id)
    if sig is None:
        raise NotFound(f"no signature {signature_id!r}; GET /api/v1/signatures lists them")
    return SignatureEntry.of(sig, library)


ops = APIRouter()


@ops.get("/healthz", response_model=Status)
async def healthz() -> Status:
    """The process is up."""
    # async: answered on the event loop, never queued behind diagnoses and database calls in worker threads.
    return Status(status="ok")


@ops.get("/readyz", response_model=Status, responses={503: _PROBLEM})
def readyz(request: Request, library: LibraryDep) -> Status:
    """The database answers and the library is loaded."""
    try:
        with state_of(request.app).engine.connect() as conn:
            conn.execute(text("SELECT 1"))
    except Exception as exc:  # any driver error means "not ready", never a 500
        raise NotReady(f"the database is not reachable ({type(exc).__name__})", headers={"Retry-After": "5"}) from None
    if not len(library):
        raise NotReady("the signature library is empty", headers={"Retry-After": "5"})
    return Status(status="ready", checks={"database": "ok", "library": f"{len(library)} signatures"})


def _check_metrics_token(request: Request, settings: Settings) -> None:
    """Let only the holder of TRACELORE_METRICS_TOKEN read the metrics (routes, rejections, load)."""
    if not settings.metrics_token:
        raise Forbidden("metrics are not served: set TRACELORE_METRICS_TOKEN and send it as `Authorization: Bearer`")
    scheme, _, sent = request.headers.get("authorization", "").strip().partition(" ")
    if scheme.lower() != "bearer" or not hmac.compare_digest(sent.strip().encode(), settings.metrics_token.encode()):
        raise Unauthorized(
            "/metrics needs `Authorization: Bearer <TRACELORE_METRICS_TOKEN>`",
            headers={"WWW-Authenticate": 'Bearer realm="tracelore-metrics"'},
        )


@ops.get("/metrics", response_class=PlainTextResponse, responses={401: _PROBLEM, 403: _PROBLEM})
def metrics_text(request: Request, metrics: MetricsDep, settings: SettingsDep) -> Response:
    """Prometheus metrics of the whole server (every worker), for the holder of the metrics token.

    A plain function: in multiprocess mode a scrape reads every worker's files, off the event loop.
    """
    _check_metrics_token(request, settings)
    body, content_type = metrics.render(request.headers.get("accept", ""))
    return Response(body, media_type=content_type)
