"""A job of several files through the API: form parts in any order, a .tar.gz of per-rank logs, hostile
archives refused; the page says which file each evidence line came from. Real per-rank logs of the corpus."""

from __future__ import annotations

import gzip
import io
import random
import tarfile
from typing import Any

import httpx
import pytest
import yaml

from app.core.engine.diagnose import diagnose_many
from app.core.knowledge.loading import Library
from app.web.archive import MAX_FILES
from tests.support import REPO, LiveServer
from tests.web.conftest import LIMIT
from tests.web.test_api import assert_problem

CASES = REPO / "tests" / "corpus" / "cases"
JOBS = sorted({p.parent.name for p in CASES.glob("*/rank*.log")})
RANKED = ["gen-dist-per-rank-index-error", "gen-dist-two-node-store-host-dies", "gen-dist-per-rank-hang"]


def _files(case: str) -> list[tuple[str, bytes]]:
    return [(p.name, p.read_bytes()) for p in sorted((CASES / case).glob("rank*.log"))]


def _expected(case: str) -> str:
    return str(yaml.safe_load((CASES / case / "case.yaml").read_text())["expected"])


def _post_parts(client: httpx.Client, files: list[tuple[str, bytes]], **params: Any) -> httpx.Response:
    parts = [("file", (name, data, "text/plain")) for name, data in files]
    return client.post("/api/v1/diagnoses", files=parts, params=params)


def _answer(r: httpx.Response) -> dict[str, Any]:
    assert r.status_code in (200, 201), r.text
    return {k: v for k, v in r.json().items() if k not in ("id", "url", "created_at")}


def _tar_gz(members: list[tuple[tarfile.TarInfo, bytes | None]]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buf.getvalue()


def _member(name: str, data: bytes = b"", kind: bytes = tarfile.REGTYPE) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type = kind
    if kind == tarfile.REGTYPE:
        info.size = len(data)
        return info, data
    info.linkname = "/etc/passwd" if kind in (tarfile.SYMTYPE, tarfile.LNKTYPE) else ""
    return info, None


def test_the_corpus_has_per_rank_jobs() -> None:
    assert set(RANKED) <= set(JOBS)


@pytest.mark.parametrize("case", RANKED)
def test_file_parts_give_one_diagnosis_whatever_their_order(client: httpx.Client, library: Library, case: str) -> None:
    files = _files(case)
    first = _answer(_post_parts(client, files, store="false"))
    for seed in range(3):
        shuffled = files[:]
        random.Random(seed).shuffle(shuffled)
        assert _answer(_post_parts(client, shuffled[::-1] if seed == 0 else shuffled, store="false")) == first
    # The job the CLI diagnoses from the same files, each keeping its name.
    assert first == diagnose_many(files, library).model_dump(mode="json")
    assert first["candidates"][0]["id"] == _expected(case)
    assert first["input"]["files"] == [name for name, _ in files]
    named = {e["file"] for c in first["candidates"] for e in c["evidence"]}
    assert named and named <= {name for name, _ in files}


def test_a_tar_gz_of_per_rank_logs_is_one_job(live: LiveServer, client: httpx.Client) -> None:
    case = "gen-dist-per-rank-index-error"
    files = _files(case)
    parts = _answer(_post_parts(client, files, store="false"))
    archive = _tar_gz([_member("job", kind=tarfile.DIRTYPE), *(_member(f"job/{n}", d) for n, d in files)])
    as_part = client.post("/api/v1/diagnoses", files={"file": ("job.tar.gz", archive, "application/gzip")})
    as_body = client.post(
        "/api/v1/diagnoses?store=false", content=archive, headers={"Content-Type": "application/gzip"}
    )
    for r in (as_part, as_body):
        got = _answer(r)
        assert got["input"]["files"] == [f"job/{n}" for n, _ in files]
        assert [c["id"] for c in got["candidates"]] == [c["id"] for c in parts["candidates"]]
        assert [(e["file"], e["line"]) for e in got["candidates"][0]["evidence"]] == [
            (f"job/{e['file']}", e["line"]) for e in parts["candidates"][0]["evidence"]
        ]
    # Stored with its files' names: the windows say which file their lines are from, and so does the page.
    record = as_part.json()
    windows = client.get(f"/api/v1/diagnoses/{record['id']}/windows").json()
    assert {w["file"] for w in windows} <= set(record["input"]["files"]) and len(windows) >= 2
    page = client.get(f"/d/{record['id']}").text
    initiating = record["candidates"][0]["evidence"][0]
    assert f'<span class="file">{initiating["file"]}</span><span class="ln">{initiating["line"]}</span>' in page
    assert '<p class="window-file">job/rank2.log</p>' in page


def test_the_page_of_one_log_names_no_file_per_line(client: httpx.Client) -> None:
    name, data = _files("gen-dist-per-rank-index-error")[-1]
    r = _post_parts(client, [(name, data)])
    page = client.get(f"/d/{r.json()['id']}").text
    assert '<span class="file">' not in page and "window-file" not in page


def _refused(live: LiveServer, client: httpx.Client, archive: bytes, status: int) -> dict[str, object]:
    before = live.count()
    body = assert_problem(
        client.post("/api/v1/diagnoses", files={"file": ("job.tar.gz", archive, "application/gzip")}), status
    )
    assert live.count() == before
    return body


LOG = b"[rank0]: step 1 loss 0.5\n"


@pytest.mark.parametrize(
    ("member", "says"),
    [
        (_member("job/evil.log", kind=tarfile.SYMTYPE), "symbolic link"),
        (_member("job/hard.log", kind=tarfile.LNKTYPE), "hard link"),
        (_member("job/dev", kind=tarfile.CHRTYPE), "device"),
        (_member("job/blk", kind=tarfile.BLKTYPE), "device"),
        (_member("job/pipe", kind=tarfile.FIFOTYPE), "FIFO"),
        (_member("../rank9.log", LOG), "outside"),
        (_member("job/../../rank9.log", LOG), "outside"),
        (_member("/etc/rank9.log", LOG), "outside"),
    ],
)
def test_hostile_archive_members_are_refused(
    live: LiveServer, client: httpx.Client, member: tuple[tarfile.TarInfo, bytes | None], says: str
) -> None:
    archive = _tar_gz([_member("job/rank0.log", LOG), member])
    body = _refused(live, client, archive, 400)
    assert says in str(body["detail"])


def test_tar_bombs_are_refused(live: LiveServer, client: httpx.Client) -> None:
    # One member of zeros far over the limit, compressed to a few KiB.
    huge = tarfile.TarInfo("job/rank0.log")
    huge.size = 64 << 20
    buf = io.BytesIO()
    with gzip.GzipFile(fileobj=buf, mode="wb", compresslevel=9) as gz:
        gz.write(huge.tobuf())
        for _ in range(64):
            gz.write(b"\0" * (1 << 20))
        gz.write(b"\0" * 1024)
    assert len(buf.getvalue()) < LIMIT
    _refused(live, client, buf.getvalue(), 413)
    # Members within the limit one by one, over it together.
    third = b"x" * (LIMIT // 3 + 1) + b"\n"
    _refused(live, client, _tar_gz([_member(f"rank{i}.log", third) for i in range(3)]), 413)
    # A gzip bomb inside the archive.
    inner = gzip.compress(b"\0" * (32 << 20), compresslevel=9)
    _refused(live, client, _tar_gz([_member("rank0.log.gz", inner)]), 413)
    # Too many members.
    many = _tar_gz([_member(f"rank{i}.log", LOG) for i in range(MAX_FILES + 1)])
    body = _refused(live, client, many, 413)
    assert str(MAX_FILES) in str(body["detail"])
    # Not an archive after all: corrupt.
    _refused(live, client, _tar_gz([_member("rank0.log", LOG)])[:60], 400)


def test_several_logs_need_distinct_names(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    twice = [("file", ("rank0.log", LOG)), ("file", ("rank0.log", LOG))]
    assert_problem(client.post("/api/v1/diagnoses", files=twice), 422, "invalid")
    assert live.count() == before


def test_a_gzip_member_is_a_log(client: httpx.Client) -> None:
    files = _files("gen-dist-per-rank-index-error")
    archive = _tar_gz([_member(f"{n}.gz", gzip.compress(d)) for n, d in files])
    got = _answer(
        client.post("/api/v1/diagnoses?store=false", content=archive, headers={"Content-Type": "application/gzip"})
    )
    assert got["input"]["files"] == [n for n, _ in files]
    assert got["candidates"][0]["id"] == _expected("gen-dist-per-rank-index-error")


def test_every_file_part_is_held_to_the_limit_together(live: LiveServer, client: httpx.Client) -> None:
    half = b"y" * (LIMIT // 2 + 1)
    body = assert_problem(_post_parts(client, [("rank0.log", half), ("rank1.log", half)]), 413, "too-large")
    assert body["limit"] == LIMIT


def test_the_hang_panel_says_which_file_each_line_came_from(client: httpx.Client) -> None:
    # Ranks 0 and 2 time out; fr_trace.log, torchfrtrace's analysis of the ranks' traces, finds rank 1 missing.
    case = "gen-dist-per-rank-fr-missing-rank"
    files = [(p.name, p.read_bytes()) for p in sorted((CASES / case).glob("*.log"))]
    record = _post_parts(client, files).json()
    assert record["hang"]["rank"] == 1
    page = client.get(f"/d/{record['id']}").text
    panel = page.split('<section class="panel hang"', 1)[1].split("</section>", 1)[0]
    assert "Suspect rank: 1" in panel and "the flight recorder&#39;s analysis (torchfrtrace)" in panel
    assert '<span class="file">fr_trace.log</span><span class="ln">6</span><code>missing ranks: {1}</code>' in panel
    assert '<span class="file">rank2.log</span><span class="ln">21</span>' in panel
