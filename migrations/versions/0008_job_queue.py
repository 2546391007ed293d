"""PostgreSQL only: the tables and functions of Procrastinate, the job queue that runs the periodic
work (retention purge, learning summary) once for all instances. SQLite needs none: each process
runs that work itself.

The schema is the one the installed Procrastinate ships (`procrastinate.schema`), which the
project's dependency holds to 3.10.x: a later release's schema changes come as a revision of their
own (its SQL migrations), never by re-running this one.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-10
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Everything Procrastinate creates is named procrastinate_*; its tables take their triggers and indexes.
DROP = """
DROP TABLE IF EXISTS procrastinate_periodic_defers, procrastinate_events, procrastinate_jobs,
    procrastinate_workers CASCADE;
DO $$
DECLARE f regprocedure;
BEGIN
    FOR f IN SELECT p.oid::regprocedure FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
             WHERE n.nspname = current_schema() AND p.proname LIKE 'procrastinate\\_%'
    LOOP
        EXECUTE 'DROP FUNCTION ' || f || ' CASCADE';
    END LOOP;
END $$;
DROP TYPE IF EXISTS procrastinate_job_to_defer_v1, procrastinate_job_status, procrastinate_job_event_type CASCADE;
"""


def _run(sql: str) -> None:
    # Several statements at once, with no parameters: psycopg sends them as they are ('%' included).
    cursor = op.get_bind().connection.dbapi_connection.cursor()  # type: ignore[union-attr]
    try:
        cursor.execute(sql)
    finally:
        cursor.close()


def upgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    try:
        from procrastinate.schema import SchemaManager
    except ImportError as exc:
        raise RuntimeError(
            "PostgreSQL needs the job queue that runs the periodic work once for all instances: "
            "pip install 'tracelore[postgres]'"
        ) from exc
    _run(SchemaManager.get_schema())


def downgrade() -> None:
    if op.get_bind().dialect.name != "postgresql":
        return
    _run(DROP)
