"""`tracelore unknowns`: the failures the service could not explain, grouped, and drafts from them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import click

from app.cli.context import current
from app.cli.errors import CommandError
from app.cli.options import SIGNATURES


def _base_url() -> str:
    return current().settings.base_url.rstrip("/")


@click.group(invoke_without_command=True)
@click.option("--since", "days", type=click.IntRange(1, 3660), default=None, help="Only lines of the last DAYS days.")
@click.option("--min-count", type=click.IntRange(1), default=1, show_default=True, help="Fewest diagnoses per cluster.")
@click.option("--resolved", is_flag=True, help="Also list clusters a library recognises now.")
@click.pass_context
def unknowns(ctx: click.Context, days: int | None, min_count: int, resolved: bool) -> None:
    """Lines the stored diagnoses could not explain, grouped by template, biggest first.

    The database comes from TRACELORE_DATABASE_URL. `tracelore unknowns draft KEY` writes a
    draft signature from a cluster; `tracelore unknowns resolve` marks the clusters the
    current library recognises.
    """
    if ctx.invoked_subcommand is not None:
        return
    from app.store.accounts import utcnow
    from app.store.learning import clusters

    since = utcnow() - timedelta(days=days) if days else None
    with current().store() as session:
        found = clusters(session, since=since, min_count=min_count, include_resolved=resolved)
    if not found:
        click.echo("No unknown failures" + (f" seen by at least {min_count} diagnoses." if min_count > 1 else "."))
        return
    base = _base_url()
    for c in found:
        state = f"  resolved by {c.resolved_by}" if c.resolved_by else ""
        click.echo(
            f"{c.key}  {c.diagnoses} diagnoses, {c.lines} lines, "
            f"{c.first_seen:%Y-%m-%d} .. {c.last_seen:%Y-%m-%d}, libraries {', '.join(c.libraries)}{state}"
        )
        click.echo(f"    template: {c.template}")
        click.echo(f"    example:  {c.example[:300]}")
        click.echo("    seen in:  " + " ".join(f"{base}/d/{m}" for m in c.members))


@unknowns.command("draft")
@click.argument("key")
@click.option("--id", "sig_id", default=None, help="The id of the new signature, layer.name (default: unknown.<key>).")
@click.option("--out", type=click.Path(dir_okay=False, path_type=Path), default=None, help="Write here, not stdout.")
def draft(key: str, sig_id: str | None, out: Path | None) -> None:
    """Write a draft signature for the cluster KEY (its key or a unique prefix of it).

    The fingerprint comes from the cluster's template (masked parts become bounded classes),
    its lines are the match examples, the nearest other clusters' lines the near misses; the
    knowledge is left TODO, and `tracelore lint` lists every TODO until it is written.
    """
    import regex

    from app.core.authoring import draft_signature, similarity
    from app.store.learning import cluster_lines, clusters, find_cluster

    if sig_id is not None and not regex.fullmatch(r"[a-z][a-z0-9_]*\.[a-z0-9_]+", sig_id):
        raise click.BadParameter("an id is layer.name in lower case, e.g. data.loader_stalled", param_hint="--id")
    with current().store() as session:
        cluster = find_cluster(session, key)
        if cluster is None:
            raise CommandError(f"no single cluster has a key starting with {key!r}; see `tracelore unknowns`")
        lines = cluster_lines(session, cluster.key, limit=5)
        others = sorted(
            (c for c in clusters(session, include_resolved=True) if c.key != cluster.key),
            key=lambda c: -similarity(c.template, cluster.template),
        )[:3]
        near = [c.example for c in others]
    text = draft_signature(sig_id or f"unknown.c{cluster.key}", cluster.template, lines, near)
    if out is None:
        click.echo(text, nl=False)
    else:
        out.write_text(text, encoding="utf-8")
        click.echo(
            f"wrote a draft for cluster {cluster.key} to {out}; `tracelore lint {out}` lists what is left", err=True
        )


@unknowns.command("resolve")
@SIGNATURES
def resolve(signatures: Path | None) -> None:
    """Mark the clusters the current library recognises (the service does this every TRACELORE_LEARN_EVERY)."""
    from app.jobs.learning import resolve_clusters
    from app.store.accounts import utcnow

    library = current().library(signatures)
    with current().store() as session:
        done = resolve_clusters(session, library, now=utcnow())
    for key, sig_id in done:
        click.echo(f"{key}  resolved by {sig_id}")
    click.echo(f"{len(done)} clusters newly recognised by library {library.version}")
