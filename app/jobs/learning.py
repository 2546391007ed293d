"""The learning loop's periodic work, shared by the service and the CLI: entry statistics
from the stored diagnoses, and unknown-failure clusters the current library now recognises.

A summary reads only what came since the last one: the failures named by diagnoses not yet
counted (added into per-day counts) and the unknown lines not yet checked. It goes in batches,
each its own transaction, so one killed half-way loses only its open batch and the next run
(on any process) goes on from there. Only when the library changes are the clusters seen before
checked again, once, in key order from a cursor kept in the database.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, replace
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session, sessionmaker

from app.core import Library
from app.core.authoring import recognised_by
from app.store.learning import cluster_lines, clusters, compute_entry_stats, mark_resolved
from app.store.summary import BATCH, claim_new_lines, cluster_keys_after, count_new_failures, set_state, state
from app.store.tables import UnknownResolutionRow

CHECKED_WITH = "clusters.library"  # the library version the clusters were last checked with
RECHECK_AFTER = "clusters.recheck_after"  # where a recheck of every cluster stands (a key), while one runs
LAST_RUN = "summary.last_run"  # what the last run did (JSON: at, counted, checked), for operators
LINES_TRIED = 20  # lines of one cluster a check diagnoses


@dataclass(frozen=True)
class Summary:
    stats: int  # failure classes with statistics
    resolved: list[tuple[str, str]]  # (cluster key, signature id) newly recognised
    counted: int = 0  # failures of diagnoses counted by this run
    checked: int = 0  # unknown lines (and clusters, on a new library) this run looked at


def resolve_clusters(session: Session, library: Library, *, now: datetime) -> list[tuple[str, str]]:
    """Mark the clusters whose lines the library recognises now; the newly resolved ones (every cluster)."""
    done = []
    for cluster in clusters(session):
        sig_id = recognised_by(cluster_lines(session, cluster.key), library)
        if sig_id is not None:
            mark_resolved(session, cluster.key, sig_id, library.version, now)
            done.append((cluster.key, sig_id))
    return done


def _resolved(session: Session, keys: list[str]) -> set[str]:
    return set(session.scalars(select(UnknownResolutionRow.key).where(UnknownResolutionRow.key.in_(keys))))


def _check(session: Session, found: dict[str, list[str]], library: Library, now: datetime) -> list[tuple[str, str]]:
    """Resolve the clusters among `found` (key: lines) that the library recognises; the new ones."""
    done = []
    resolved = _resolved(session, list(found))
    for key, lines in found.items():
        if key in resolved:
            continue
        sig_id = recognised_by(list(dict.fromkeys(lines))[:LINES_TRIED], library)
        if sig_id is not None:
            mark_resolved(session, key, sig_id, library.version, now)
            done.append((key, sig_id))
    return done


def _new_lines(
    make_session: sessionmaker[Session], library: Library, now: datetime, batch: int
) -> tuple[int, list[tuple[str, str]]]:
    """Check the unknown lines stored since the last run against the library."""
    checked, done = 0, []
    while True:
        with make_session.begin() as session:
            lines = claim_new_lines(session, limit=batch)
            found: defaultdict[str, list[str]] = defaultdict(list)
            for key, text in reversed(lines):  # newest first, as cluster_lines gives them
                found[key].append(text)
            done += _check(session, dict(found), library, now)
        checked += len(lines)
        if len(lines) < batch:
            return checked, done


def _recheck(
    make_session: sessionmaker[Session], library: Library, now: datetime, batch: int
) -> tuple[int, list[tuple[str, str]]]:
    """On a library the clusters were not checked with: check every cluster once, from where it stands."""
    with make_session.begin() as session:
        before = state(session, CHECKED_WITH)
        if before != library.version:
            set_state(session, CHECKED_WITH, library.version)
            # A first run finds every line unchecked: the new-line pass has seen them all.
            set_state(session, RECHECK_AFTER, "" if before is not None else None)
        after = state(session, RECHECK_AFTER)
    checked, done = 0, []
    while after is not None:
        with make_session.begin() as session:
            if state(session, CHECKED_WITH) != library.version:
                break  # another library took over meanwhile (a rolling upgrade): its run rechecks
            keys = cluster_keys_after(session, after, limit=batch)
            done += _check(session, {key: cluster_lines(session, key) for key in keys}, library, now)
            after = keys[-1] if len(keys) == batch else None
            set_state(session, RECHECK_AFTER, after)
        checked += len(keys)
    return checked, done


def summarise(
    make_session: sessionmaker[Session], library: Library, *, now: datetime, window_days: int, batch: int = BATCH
) -> Summary:
    """Count new diagnoses into the entry statistics and check new unknown lines, batch by batch."""
    counted = 0
    while True:
        with make_session.begin() as session:
            n = count_new_failures(session, limit=batch)
        counted += n
        if n < batch:
            break
    lines, resolved = _new_lines(make_session, library, now, batch)
    rechecked, more = _recheck(make_session, library, now, batch)
    summary = Summary(0, resolved + more, counted=counted, checked=lines + rechecked)
    with make_session.begin() as session:
        stats = compute_entry_stats(session, now=now, window_days=window_days)
        done = {
            "at": now.isoformat(),
            "counted": counted,
            "checked": summary.checked,
            "resolved": len(summary.resolved),
        }
        set_state(session, LAST_RUN, json.dumps(done))
    return replace(summary, stats=stats)
