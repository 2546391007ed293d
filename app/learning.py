"""The learning loop's periodic work, shared by the service and the CLI: entry statistics
from the stored diagnoses, and unknown-failure clusters the current library now recognises.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy.orm import Session, sessionmaker

from app.core.knowledge.loading import Library
from app.core.knowledge.unknowns import recognised_by
from app.store.learning import cluster_lines, clusters, compute_entry_stats, mark_resolved


@dataclass(frozen=True)
class Summary:
    stats: int  # failure classes with statistics
    resolved: list[tuple[str, str]]  # (cluster key, signature id) newly recognised


def resolve_clusters(session: Session, library: Library, *, now: datetime) -> list[tuple[str, str]]:
    """Mark the clusters whose lines the library recognises now; the newly resolved ones."""
    done = []
    for cluster in clusters(session):
        sig_id = recognised_by(cluster_lines(session, cluster.key), library)
        if sig_id is not None:
            mark_resolved(session, cluster.key, sig_id, library.version, now)
            done.append((cluster.key, sig_id))
    return done


def summarise(make_session: sessionmaker[Session], library: Library, *, now: datetime, window_days: int) -> Summary:
    """Recompute the entry statistics and resolve clusters, in one transaction."""
    with make_session.begin() as session:
        stats = compute_entry_stats(session, now=now, window_days=window_days)
        resolved = resolve_clusters(session, library, now=now)
    return Summary(stats, resolved)
