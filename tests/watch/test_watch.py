"""`tracelore watch` end to end: a real watch process follows logs that another real process
writes line by line at real speed (lines of the corpus's real logs)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from app.core.knowledge.loading import Library
from tests.support import live_server, make_settings

ROOT = Path(__file__).resolve().parents[2]
CASES = ROOT / "tests" / "corpus" / "cases"
WRITER = Path(__file__).with_name("logwriter.py")
INDEX_ERROR = CASES / "gen-dist-per-rank-index-error"  # rank 2 of 3 fails mid-run; ranks 0-1 lose their peer
HEALTHY = CASES / "gen-dist-per-rank-healthy-4ranks"
FOUR_RANKS = CASES / "gen-dist-index-error-4ranks"  # one log, four ranks, rank 2 fails
DELAY = 0.02  # seconds between lines: a chatty job


def lines_of(path: Path) -> list[str]:
    return path.read_text(encoding="utf-8").splitlines()


@dataclass
class Watch:
    """A running `tracelore watch` and what it printed, with when."""

    proc: subprocess.Popen[str]
    out: list[tuple[float, str]] = field(default_factory=list)
    err: list[str] = field(default_factory=list)
    ready: threading.Event = field(default_factory=threading.Event)

    def reports(self) -> list[tuple[float, str]]:
        """(time printed, text) of each report in text format."""
        found: list[tuple[float, list[str]]] = []
        for t, line in self.out:
            if line.startswith("=== tracelore watch"):
                found.append((t, []))
            elif found:
                found[-1][1].append(line)
        return [(t, "\n".join(body)) for t, body in found]

    def json_reports(self) -> list[tuple[float, dict[str, object]]]:
        return [(t, json.loads(line)) for t, line in self.out if line.startswith("{")]

    def wait(self, timeout: float = 60) -> int:
        code = self.proc.wait(timeout)
        self._threads_done.wait(5)
        return code

    _threads_done: threading.Event = field(default_factory=threading.Event)


def cli_env(signatures: Path) -> dict[str, str]:
    """The environment a `tracelore` process of these tests runs in: the test library's signatures."""
    return {**os.environ, "TRACELORE_SIGNATURES_DIR": str(signatures)}


def start_watch(args: list[str], signatures: Path, *, stdin: object = None) -> Watch:
    env = cli_env(signatures)
    proc = subprocess.Popen(
        [sys.executable, "-m", "app", "watch", *args],
        cwd=ROOT,
        env=env,
        stdin=stdin if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    watch = Watch(proc)
    left = [2]

    def done() -> None:
        left[0] -= 1
        if not left[0]:
            watch._threads_done.set()

    def read_out() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            watch.out.append((time.time(), line.rstrip("\n")))
        done()

    def read_err() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            watch.err.append(line.rstrip("\n"))
            if "following" in line:
                watch.ready.set()
        watch.ready.set()
        done()

    threading.Thread(target=read_out, daemon=True).start()
    threading.Thread(target=read_err, daemon=True).start()
    return watch


def run_writer(
    tmp: Path, steps: list[dict[str, object]], *, mark: str | None = None, **kwargs: object
) -> subprocess.Popen[bytes]:
    plan = tmp / "plan.json"
    plan.write_text(json.dumps({"steps": steps, "mark": mark, "stamps": str(tmp / "stamps")}))
    return subprocess.Popen([sys.executable, str(WRITER), str(plan)], **kwargs)  # type: ignore[call-overload]


def stamps(tmp: Path) -> list[float]:
    return [float(x) for x in (tmp / "stamps").read_text().split()]


@pytest.fixture
def stopped() -> Iterator[list[subprocess.Popen[object]]]:
    """Processes a test started, ended if the test did not end them."""
    procs: list[subprocess.Popen[object]] = []
    yield procs
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdin, proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()


def per_rank_job(folder: Path) -> list[dict[str, object]]:
    """Ranks 0 and 1 write their steps and the echoes first; then rank 2's traceback lands."""
    return [
        {"write": str(folder / "rank0.log"), "lines": lines_of(INDEX_ERROR / "rank0.log"), "delay": DELAY},
        {"write": str(folder / "rank1.log"), "lines": lines_of(INDEX_ERROR / "rank1.log"), "delay": DELAY},
        {"sleep": 1.0},
        {"write": str(folder / "rank2.log"), "lines": lines_of(INDEX_ERROR / "rank2.log"), "delay": DELAY},
    ]


def test_per_rank_files_first_failure_within_two_seconds_and_corrected_by_the_earlier_cause(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()  # empty: every rank's file appears after the watch starts
    watch = start_watch([str(logs), "--idle-timeout", "3"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60), watch.err
    writer = run_writer(tmp_path, per_rank_job(logs), mark="IndexError: index out of range")
    stopped.append(writer)
    assert writer.wait(60) == 0
    assert watch.wait() == 1, watch.err
    reports = watch.reports()
    assert len(reports) >= 2, watch.out
    # First the echoes of ranks 0-1 (no cause known yet), then rank 2's error replaces them.
    first_time, first = reports[0]
    assert "dist.gloo_connection_closed" in first and "INITIATING: not recognised" in first
    found = [(t, text) for t, text in reports if "INITIATING: Token or label index out of range" in text]
    assert found, reports
    t, text = found[0]
    assert "rank2.log, line 40, rank 2" in text
    assert "COLLATERAL" in text and "dist.gloo_connection_closed" in text
    written = stamps(tmp_path)[0]
    assert first_time < written
    assert t - written < 2.0, f"reported {t - written:.2f} s after the line was written"


def test_exit_on_likely_ends_the_watch_while_the_job_still_runs(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    steps = [*per_rank_job(logs), {"sleep": 30}]  # the job hangs on after the error
    watch = start_watch(
        [
            str(logs / "rank0.log"),
            str(logs / "rank1.log"),
            str(logs / "rank2.log"),
            "--exit-on",
            "likely",
            "--settle",
            "0.5",
        ],
        signatures_dir,
    )
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    writer = run_writer(tmp_path, steps, mark="IndexError: index out of range")
    stopped.append(writer)
    assert watch.wait(60) == 1
    ended = time.time()
    assert writer.poll() is None, "the watch must end before the job does"
    assert ended - stamps(tmp_path)[0] < 4.0
    assert "data.index_out_of_range" in watch.reports()[-1][1]


def test_exit_on_healthy_job_ends_with_zero_on_idle(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    log = tmp_path / "rank0.log"
    watch = start_watch([str(log), "--exit-on", "any", "--idle-timeout", "1.5"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    writer = run_writer(tmp_path, [{"write": str(log), "lines": lines_of(HEALTHY / "rank0.log"), "delay": DELAY}])
    stopped.append(writer)
    assert watch.wait(60) == 0
    assert "Looks healthy (17 lines" in watch.reports()[-1][1]


def test_standard_input_reports_while_the_stream_runs_and_exits_at_its_end(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    lines = lines_of(FOUR_RANKS / "log.txt")
    writer = run_writer(
        tmp_path,
        # Lines flow once the watch is up (its start-up is not what is measured), and the stream
        # stays open 8 s after the last one, so a report made as the lines came is told apart
        # from the one made at its end however loaded the machine is.
        [{"wait_for": str(tmp_path / "go")}, {"write": "-", "lines": lines, "delay": DELAY}, {"sleep": 8}],
        mark="IndexError",
        stdout=subprocess.PIPE,
    )
    stopped.append(writer)
    watch = start_watch(["-", "--format", "json"], signatures_dir, stdin=writer.stdout)
    stopped.append(watch.proc)
    assert writer.stdout is not None
    writer.stdout.close()  # the watch holds the pipe now
    assert watch.ready.wait(60)
    (tmp_path / "go").touch()
    assert watch.wait(60) == 1
    reports = watch.json_reports()
    hits = [t for t, d in reports if d["candidates"] and d["candidates"][0]["id"] == "data.index_out_of_range"]  # type: ignore[index]
    assert hits, reports
    assert hits[0] - stamps(tmp_path)[0] < 8.0  # reported while the stream was still open
    assert hits[0] < reports[-1][0]  # not only in the report made at its end
    final = reports[-1][1]
    assert final["input"]["lines"] == len(lines)  # type: ignore[index]
    assert final["input"]["files"] == ["<stdin>"]  # type: ignore[index]


def test_a_rotated_file_is_read_to_its_end_and_the_new_one_from_its_start(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    lines = lines_of(INDEX_ERROR / "rank2.log")
    head = lines_of(INDEX_ERROR / "rank0.log")[:12]  # rank 0's steps
    log = tmp_path / "train.log"
    watch = start_watch([str(tmp_path), "--format", "json", "--idle-timeout", "3"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    steps = [
        {"write": str(log), "lines": head, "delay": DELAY},
        {"rename": [str(log), str(tmp_path / "train.log.1")]},  # logrotate: the old file moves away
        {"write": str(log), "lines": lines, "delay": DELAY},
    ]
    writer = run_writer(tmp_path, steps)
    stopped.append(writer)
    assert writer.wait(60) == 0
    assert watch.wait() == 1
    final = watch.json_reports()[-1][1]
    assert sorted(final["input"]["files"]) == [str(log), str(tmp_path / "train.log.1")]  # type: ignore[index]
    assert final["input"]["lines"] == len(head) + len(lines)  # nothing read twice, nothing lost  # type: ignore[index]
    top = final["candidates"][0]  # type: ignore[index]
    assert (top["id"], top["file"], top["line"]) == ("data.index_out_of_range", str(log), 40)


def test_a_truncated_file_is_followed_from_its_new_start(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    lines = lines_of(INDEX_ERROR / "rank2.log")
    log = tmp_path / "train.log"
    log.write_text("\n".join(lines_of(HEALTHY / "rank0.log")) + "\n")  # already there when the watch starts
    watch = start_watch([str(log), "--format", "json", "--idle-timeout", "3"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    writer = run_writer(
        tmp_path,
        [{"sleep": 1}, {"truncate": str(log)}, {"sleep": 1}, {"write": str(log), "lines": lines, "delay": DELAY}],
    )
    stopped.append(writer)
    assert writer.wait(60) == 0
    assert watch.wait() == 1
    final = watch.json_reports()[-1][1]
    top = final["candidates"][0]  # type: ignore[index]
    assert (top["id"], top["file"], top["line"]) == ("data.index_out_of_range", str(log), 40)
    assert final["input"]["lines"] == 17 + len(lines)  # type: ignore[index]


def test_polling_finds_a_file_that_appears_later_and_notify_gets_the_json(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    log = tmp_path / "later" / "rank2.log"
    log.parent.mkdir()
    sink = tmp_path / "notified.json"
    watch = start_watch([str(log), "--poll", "--idle-timeout", "3", "--notify", f"cat > {sink}"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    assert "(polling)" in " ".join(watch.err)
    writer = run_writer(
        tmp_path,
        [{"sleep": 1}, {"write": str(log), "lines": lines_of(INDEX_ERROR / "rank2.log"), "delay": DELAY}],
        mark="IndexError",
    )
    stopped.append(writer)
    assert writer.wait(60) == 0
    assert watch.wait() == 1
    sent = json.loads(sink.read_text())
    assert sent["candidates"][0]["id"] == "data.index_out_of_range"
    assert watch.reports()[0][0] - stamps(tmp_path)[0] < 2.0


def test_sigterm_ends_with_the_final_report_and_exit_status(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    log = tmp_path / "rank2.log"
    log.write_text("\n".join(lines_of(INDEX_ERROR / "rank2.log")) + "\n")
    watch = start_watch([str(log)], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    deadline = time.time() + 30
    while not watch.reports() and time.time() < deadline:
        time.sleep(0.1)
    watch.proc.send_signal(signal.SIGTERM)
    assert watch.wait(30) == 1
    assert "data.index_out_of_range" in watch.reports()[0][1]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["-", "x.log"], "standard input (-) is watched alone"),
        (["/nonexistent-folder-of-tracelore/train.log"], "does not exist"),
        (["train.log.gz"], "a compressed file does not grow"),
    ],
)
def test_usage_errors_exit_2_with_a_message(
    signatures_dir: Path, args: list[str], message: str, stopped: list[subprocess.Popen[object]]
) -> None:
    watch = start_watch(args, signatures_dir)
    stopped.append(watch.proc)
    assert watch.wait(60) == 2
    assert message in " ".join(watch.err)


def test_an_unreadable_file_is_reported_and_the_others_are_still_watched(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    locked = tmp_path / "rank1.log"
    locked.symlink_to(locked)  # a link to itself: opening it fails (ELOOP), for root too
    log = tmp_path / "rank2.log"
    log.write_text("\n".join(lines_of(INDEX_ERROR / "rank2.log")) + "\n")
    watch = start_watch([str(locked), str(log), "--idle-timeout", "1"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.wait(60) == 1
    assert any(f"cannot read {locked}" in line for line in watch.err), watch.err
    assert "data.index_out_of_range" in watch.reports()[-1][1]


def test_server_gets_the_evidence_and_gives_a_permalink(
    tmp_path: Path, signatures_dir: Path, library: Library, sqlite_url: str, stopped: list[subprocess.Popen[object]]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    with live_server(make_settings(sqlite_url, tmp_path), library) as server:
        watch = start_watch([str(logs), "--idle-timeout", "3", "--server", server.url], signatures_dir)
        stopped.append(watch.proc)
        assert watch.ready.wait(60)
        writer = run_writer(tmp_path, per_rank_job(logs))
        stopped.append(writer)
        assert writer.wait(60) == 0
        assert watch.wait() == 1
        links = [line.rsplit(" ", 1)[1] for line in watch.err if "full diagnosis: " in line]
        assert links, watch.err
        with server.client() as http:
            stored = http.get(links[-1].replace("/d/", "/api/v1/diagnoses/"))
        assert stored.status_code == 200, stored.text
        body = stored.json()
        diagnosis = body.get("diagnosis", body)
        assert diagnosis["candidates"][0]["id"] == "data.index_out_of_range"
        assert diagnosis["candidates"][0]["line"] == 40  # the file's own line numbers


def test_a_long_file_already_there_is_read_to_its_end_without_waiting_for_changes(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    from bench.loggen import generate

    log = tmp_path / "train.log"
    generate(log, 64 << 20)  # 64 MiB of a real-looking job ending in an OOM and its echoes
    # The bound is what a one-shot diagnosis of the same file takes on this machine now, so a
    # loaded machine slows both alike; waiting for changes between reads would take far longer.
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "app", "diagnose", str(log), "--format", "json"],
        env=cli_env(signatures_dir),
        capture_output=True,
        check=False,
        timeout=300,
    )
    one_shot = time.monotonic() - started
    started = time.monotonic()
    watch = start_watch([str(log), "--exit-on", "likely", "--settle", "0", "--format", "json"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.wait(120) == 1
    took = time.monotonic() - started
    final = watch.json_reports()[-1][1]
    assert final["candidates"][0]["id"] == "cuda.oom"  # type: ignore[index]
    assert final["input"]["bytes"] == log.stat().st_size  # type: ignore[index]
    assert took < 3 * one_shot + 5, (
        f"{took:.1f} s against {one_shot:.1f} s for one diagnosis: the watch waited for changes while bytes were left"
    )


def test_a_new_file_that_gets_a_rotated_files_inode_back_is_followed(
    tmp_path: Path, signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    # Rotating twice deletes the first rotated part (replaced by the second): the file system
    # hands its inode to the next new file, which must not pass for a part read already.
    steps_of = lines_of(INDEX_ERROR / "rank0.log")[:6]
    log, old = tmp_path / "train.log", tmp_path / "train.log.1"
    watch = start_watch([str(tmp_path), "--format", "json", "--idle-timeout", "3"], signatures_dir)
    stopped.append(watch.proc)
    assert watch.ready.wait(60)
    steps: list[dict[str, object]] = []
    for _ in range(6):
        steps += [
            {"write": str(log), "lines": steps_of, "delay": DELAY},
            {"sleep": 0.5},
            {"rename": [str(log), str(old)]},
            {"sleep": 0.5},
        ]
    steps.append({"write": str(log), "lines": lines_of(INDEX_ERROR / "rank2.log"), "delay": DELAY})
    writer = run_writer(tmp_path, steps)
    stopped.append(writer)
    assert writer.wait(60) == 0
    assert watch.wait() == 1, watch.err
    top = watch.json_reports()[-1][1]["candidates"][0]  # type: ignore[index]
    assert (top["id"], top["file"], top["line"]) == ("data.index_out_of_range", str(log), 40)


def test_text_reports_link_the_encyclopedia_at_the_base_url(
    signatures_dir: Path, stopped: list[subprocess.Popen[object]]
) -> None:
    log = b"step 1\ntorch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB\n"
    watch = start_watch(["-", "--base-url", "https://tracelore.example.org"], signatures_dir, stdin=subprocess.PIPE)
    stopped.append(watch.proc)
    assert watch.proc.stdin is not None
    watch.proc.stdin.write(log.decode())
    watch.proc.stdin.close()
    assert watch.wait(60) == 1
    assert "https://tracelore.example.org/failures/cuda.oom" in watch.reports()[-1][1]
