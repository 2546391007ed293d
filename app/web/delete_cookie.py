"""The browser cookie that holds a diagnosis's delete token: set by the diagnose form, read by the delete button."""

from __future__ import annotations

from fastapi import Response

from app.config import Settings
from app.core.stored import StoredDiagnosis

COOKIE_PREFIX = "tl_delete_"


def delete_cookie_name(diagnosis_id: str) -> str:
    """The browser cookie that holds a diagnosis's delete token (scoped to its page)."""
    return COOKIE_PREFIX + diagnosis_id


def remember_delete_token(response: Response, record: StoredDiagnosis, settings: Settings, *, secure: bool) -> None:
    """Give the browser that made a diagnosis the token to delete it (HttpOnly, this page only)."""
    if record.delete_token is None:
        return
    response.set_cookie(
        delete_cookie_name(record.permalink_id),
        record.delete_token,
        max_age=(settings.retention_days or 365) * 86400,
        path=f"/d/{record.id}",
        httponly=True,
        secure=secure,
        samesite="strict",  # never sent with a request started by another site
    )
