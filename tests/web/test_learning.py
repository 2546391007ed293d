"""The learning loop on a real server, SQLite and PostgreSQL: real logs whose class a library lacks
become clusters; store=false leaves no trace; a library that knows them resolves them; entry pages
show what the service has seen, only above the minimum count; the admin page is for admins."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from sqlalchemy import func, select

from app.cli import main
from app.core.knowledge.loading import Library, load_library
from app.jobs.learning import resolve_clusters
from app.store import accounts
from app.store.learning import clusters
from app.store.tables import DiagnosisRow, UnknownLineRow
from app.web.identity import SESSION_COOKIE, session_cookie
from app.web.learning import learn_logged
from app.web.state import state_of
from tests.conftest import BACKENDS, database_for
from tests.support import LiveServer, library_without, live_server, make_settings

CASES = Path(__file__).resolve().parents[1] / "corpus" / "cases"
HTML = {"accept": "text/html"}
MISSING = ("data.corrupt_image", "tensor.shape_mismatch")
# Real logs of the missing classes: one truncated-image failure from two public threads and a run.
TRUNCATED = ("gh-media-smart-vedastr-72", "gh-pytorch-vision-138", "gen-data-corrupt-truncated-jpeg")
TRUNCATED_TEMPLATE = "OSError: image file is truncated (<NUM> bytes not processed)"
MAT1 = "gen-rt-shape-mat1-mat2"
# A two-rank job: rank 1's missing data shard, rank 0's closed gloo connection, the launcher's report.
SHARD = "gen-dist-missing-shard"
MIN_COUNT = 2


@pytest.fixture(scope="module")
def reduced(signatures_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Library:
    return load_library(library_without(signatures_dir, MISSING, tmp_path_factory.mktemp("reduced")))


@pytest.fixture(scope="module", params=BACKENDS)
def server(
    request: pytest.FixtureRequest, reduced: Library, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    tmp = tmp_path_factory.mktemp(f"learning-{request.param}")
    url = database_for(request.param, request, tmp)
    settings = make_settings(url, tmp, stats_min_count=MIN_COUNT)
    with live_server(settings, reduced) as live:
        with state_of(live.app).sessionmaker.begin() as session:  # PostgreSQL's database is shared by the session
            session.execute(UnknownLineRow.__table__.delete())
        yield live


def _post(client: httpx.Client, case: str, **params: str) -> httpx.Response:
    body = (CASES / case / "log.txt").read_bytes()
    r = client.post("/api/v1/diagnoses", content=body, headers={"content-type": "text/plain"}, params=params)
    assert r.status_code in (200, 201), r.text
    return r


def _lines(live: LiveServer, template: str) -> int:
    with state_of(live.app).sessionmaker.begin() as session:
        return int(session.scalar(select(func.count()).where(UnknownLineRow.template == template)) or 0)


def test_unknown_failures_cluster_and_resolve(server: LiveServer, library: Library) -> None:
    with server.client() as client:
        ids = [_post(client, case).json()["id"] for case in TRUNCATED]
        _post(client, MAT1, store="false")
    with state_of(server.app).sessionmaker.begin() as session:
        found = {c.template: c for c in clusters(session)}
    truncated = found[TRUNCATED_TEMPLATE]
    assert (truncated.diagnoses, sorted(truncated.members)) == (3, sorted(ids))
    assert truncated.libraries == [state_of(server.app).library.version]
    # store=false: no diagnosis, so nothing of it is kept.
    assert _lines(server, "RuntimeError: mat1 and mat2 shapes cannot be multiplied (<DIMS> and <DIMS>)") == 0

    db = str(state_of(server.app).settings.effective_database_url)
    listed = CliRunner().invoke(main, ["unknowns", "--min-count", "3"], env={"TRACELORE_DATABASE_URL": db})
    assert listed.exit_code == 0, listed.output
    assert f"{truncated.key}  3 diagnoses" in listed.output and f"template: {TRUNCATED_TEMPLATE}" in listed.output
    assert all(f"/d/{i}" in listed.output for i in ids)
    drafted = CliRunner().invoke(
        main,
        ["unknowns", "draft", truncated.key[:6], "--id", "data.image_truncated"],
        env={"TRACELORE_DATABASE_URL": db},
    )
    assert drafted.exit_code == 0, drafted.output
    assert "id: data.image_truncated" in drafted.output and "image file is truncated" in drafted.output

    # The shipped library knows the class: the cluster is resolved by it and listed no more.
    with state_of(server.app).sessionmaker.begin() as session:
        done = resolve_clusters(session, library, now=datetime.now(UTC))
    assert (truncated.key, "data.corrupt_image") in done
    again = CliRunner().invoke(main, ["unknowns"], env={"TRACELORE_DATABASE_URL": db})
    assert truncated.key not in again.output
    shown = CliRunner().invoke(main, ["unknowns", "--resolved"], env={"TRACELORE_DATABASE_URL": db})
    assert "resolved by data.corrupt_image" in shown.output

    # Deleting a diagnosis takes its lines with it.
    with state_of(server.app).sessionmaker.begin() as session:
        session.execute(DiagnosisRow.__table__.delete().where(DiagnosisRow.id == ids[0]))
    assert _lines(server, TRUNCATED_TEMPLATE) == 2


def test_entry_pages_show_what_the_service_has_seen_above_the_minimum(server: LiveServer) -> None:
    with server.client() as client:
        made = [_post(client, SHARD).json() for _ in range(MIN_COUNT)]
        lone = _post(client, "gen-dist-nan-loss-check").json()  # a loss.nan run, once
        summary = learn_logged(server.app)
        assert summary is not None and summary.stats >= 1
        first = made[0]["candidates"][0]
        assert first["id"] == "data.file_not_found"
        echoes = [c["id"] for c in made[0]["candidates"] if c["caused_by"] == "data.file_not_found"]
        page = client.get("/failures/data.file_not_found", headers=HTML).text
        assert 'id="seen"' in page and f"the first failure of {MIN_COUNT} diagnoses" in page
        assert echoes and all(f'<code class="id">{e}</code></a> ({MIN_COUNT})' in page for e in echoes)
        echo = client.get(f"/failures/{echoes[0]}", headers=HTML).text
        assert 'id="seen"' in echo and "often caused by" in echo and "data.file_not_found" in echo
        # Seen once: under the minimum, nothing is shown.
        assert lone["candidates"][0]["id"] == "loss.nan"
        quiet = client.get("/failures/loss.nan", headers=HTML).text
        assert 'id="seen"' not in quiet


def test_the_unknowns_page_is_for_signed_in_admins(server: LiveServer) -> None:
    with server.client() as client:
        _post(client, TRUNCATED[0])
        assert client.get("/admin/unknowns", headers=HTML).status_code == 401
        with state_of(server.app).sessionmaker.begin() as session:
            account = accounts.ensure_account(session, "ops@example.com", now=accounts.utcnow())
            token = accounts.create_session(session, account.id, now=accounts.utcnow(), lifetime=timedelta(hours=1))
        client.cookies.set(SESSION_COOKIE, session_cookie([b"test-secret"], token))
        assert client.get("/admin/unknowns", headers=HTML).status_code == 403
        with state_of(server.app).sessionmaker.begin() as session:
            accounts.set_admin(session, "ops@example.com", True)
        page = client.get("/admin/unknowns", headers=HTML)
        assert page.status_code == 200
        with state_of(server.app).sessionmaker.begin() as session:
            (cluster,) = [c for c in clusters(session, include_resolved=True) if c.template == TRUNCATED_TEMPLATE]
        assert f'id="cluster-{cluster.key}"' in page.text
        assert "image file is truncated (&lt;NUM&gt; bytes not processed)" in page.text
