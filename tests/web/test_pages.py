"""The pages, end to end on a real server: the form works without JavaScript and the diagnosis page says it all."""

from __future__ import annotations

import re

import httpx
import pytest

from tests.core.test_environment import NCCL_TESTS_284
from tests.core.test_ranker import OOM_CASCADE
from tests.support import REPO, SAMPLES, LiveServer

HTML = {"Accept": "text/html,application/xhtml+xml"}


def submit(client: httpx.Client, **kwargs: object) -> httpx.Response:
    """What a browser sends for the form: both the text area and the file input."""
    files = kwargs.pop("files", None) or {"log": (None, ""), "file": ("", b"", "application/octet-stream")}
    return client.post("/diagnose", files=files, headers=HTML, follow_redirects=False, **kwargs)  # type: ignore[arg-type]


def diagnosis_page(client: httpx.Client, log: str) -> str:
    """The page a pasted log's diagnosis is shown on."""
    r = submit(client, files={"log": (None, log)})
    return client.get(r.headers["location"], headers=HTML).text


def test_home_has_a_labelled_form_samples_and_the_storage_policy(client: httpx.Client) -> None:
    page = client.get("/", headers=HTML)
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    html = page.text
    assert '<label for="log">' in html and '<label for="file">' in html
    assert 'method="post"' in html and 'enctype="multipart/form-data"' in html
    assert "deleted after 30 days" in html and "SHA-256" in html
    assert "?sample=ddp-cuda-oom" in html
    assert '<html lang="en">' in html and 'name="viewport"' in html
    # Everything is served by the app: no external scripts, styles or fonts.
    assert not re.search(r'<(?:script|link)[^>]+(?:src|href)="(?:https?:)?//', html)


def test_static_files_are_served(client: httpx.Client) -> None:
    css = client.get("/static/tracelore.css")
    js = client.get("/static/tracelore.js")
    assert css.status_code == 200 and "text/css" in css.headers["content-type"]
    assert js.status_code == 200 and "javascript" in js.headers["content-type"]


def test_a_sample_fills_the_paste_box(client: httpx.Client) -> None:
    html = client.get("/?sample=ddp-cuda-oom", headers=HTML).text
    assert "Tried to allocate 3.91 GiB" in html
    assert client.get("/samples/oom-killed.log").text == (SAMPLES / "oom-killed.log").read_text()
    assert client.get("/?sample=nope", headers=HTML).status_code == 404


@pytest.mark.parametrize(
    ("sample", "initiating"),
    [("ddp-cuda-oom", "cuda.oom"), ("oom-killed", "host.oom_killed"), ("torn-checkpoint", "checkpoint.truncated")],
)
def test_each_sample_is_diagnosed(client: httpx.Client, sample: str, initiating: str) -> None:
    body = client.post("/api/v1/diagnoses?store=false", content=(SAMPLES / f"{sample}.log").read_bytes()).json()
    assert body["candidates"][0]["id"] == initiating and body["candidates"][0]["role"] == "initiating"


def test_pasting_a_log_redirects_to_its_permalink_page(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    text = (SAMPLES / "ddp-cuda-oom.log").read_text()
    r = submit(client, files={"log": (None, text), "file": ("", b"", "application/octet-stream")})
    assert r.status_code == 303
    assert re.fullmatch(r".*/d/[A-Za-z0-9_-]{22}", r.headers["location"])
    assert live.count() == before + 1
    page = client.get(r.headers["location"], headers=HTML)
    assert page.status_code == 200
    html = page.text
    assert "<h1>CUDA out of memory</h1>" in html
    assert "rank 5, line 20" in html  # the initiating failure first, with rank and line
    # Every pattern that matched the line is highlighted, and the line is shown once.
    assert "<mark>torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB</mark>" in html
    assert "<mark>GPU 5 has a total capacity of 79.15 GiB of which 2.12 GiB is free</mark>" in html
    initiating = html.split("Collateral: echoes", 1)[0]
    assert initiating.count('<li><span class="ln">20</span>') == 1
    assert "<dt>requested</dt><dd><code>3.91 GiB</code></dd>" in html  # captured facts
    assert 'href="/failures/cuda.oom"' in html
    assert 'class="copy" data-copy="verify-cuda.oom" hidden' in html  # shown by JavaScript only
    # The copy box holds the verify command alone; what its output should show is said beside it.
    box = re.search(r'<pre id="verify-cuda.oom"><code>(.*?)</code></pre>', html, re.S)
    assert box is not None and box[1] == "nvidia-smi --query-gpu=index,memory.used,memory.total --format=csv -l 5"
    assert '<p class="verify-explain">run beside a few steps at the largest sequence length' in html
    assert "Collateral: echoes of the failure above" in html and "Why collateral:" in html
    assert '<details id="e-nccl.watchdog_timeout">' in html and "NCCL collective timed out" in html
    assert "Timeline across ranks" in html and "Log context around the evidence" in html
    record_id = r.headers["location"].rsplit("/", 1)[1]
    assert f'href="/api/v1/diagnoses/{record_id}"' in html


def test_choosing_a_file_works_and_wins_over_an_empty_paste(client: httpx.Client) -> None:
    data = (SAMPLES / "torn-checkpoint.log").read_bytes()
    r = submit(client, files={"log": (None, ""), "file": ("torn.log", data, "text/plain")})
    assert r.status_code == 303
    assert "Checkpoint file truncated" in client.get(r.headers["location"], headers=HTML).text


def test_an_empty_form_shows_the_error_on_the_form(live: LiveServer, client: httpx.Client) -> None:
    before = live.count()
    r = submit(client)
    assert r.status_code == 422 and r.headers["content-type"].startswith("text/html")
    assert 'role="alert"' in r.text and "empty" in r.text and '<textarea id="log"' in r.text
    assert live.count() == before


def test_unknown_pages_are_html_for_browsers_and_problems_for_clients(client: httpx.Client) -> None:
    page = client.get("/d/not-a-real-id", headers=HTML)
    assert page.status_code == 404 and "<h1" in page.text and "expired" in page.text
    problem = client.get("/d/not-a-real-id")
    assert problem.status_code == 404 and problem.headers["content-type"] == "application/problem+json"


def test_log_text_is_escaped_and_a_log_without_known_failures_renders(client: httpx.Client) -> None:
    log = "epoch 1 done\nERROR: <script>alert('x')</script> while uploading metrics\nbye\n"
    html = diagnosis_page(client, log)
    assert "No known failure found" in html and "Unexplained error lines" in html
    assert "<script>alert" not in html and "&lt;script&gt;alert" in html


def test_a_log_with_nothing_recognised_shows_its_first_exception_and_similar_entries(client: httpx.Client) -> None:
    log = (
        "Traceback (most recent call last):\n"
        '  File "train.py", line 12, in <module>\n'
        "    dataset = load_dataset('cnn_dailymail', '3.0.0')\n"
        "FrobnicateError: could not frobnicate the dataset shards while downloading the tokenizer\n"
    )
    html = diagnosis_page(client, log)
    assert "<h1>No known failure found</h1>" in html
    verdict = html.split('id="verdict">', 1)[1].split("</p>", 1)[0]
    assert "the log&#39;s first error (line 4) is not one Tracelore knows" in verdict, verdict
    panel = html.split('class="panel candidate unrecognised"', 1)[1].split("</article>", 1)[0]
    assert "nothing in the log is recognised; this is the first exception it raised" in panel
    assert "<code>FrobnicateError: could not frobnicate the dataset shards" in panel
    assert "Entries worded like it (similar, not matched)" in panel and 'href="/failures/' in panel


def test_a_finished_run_reads_healthy_and_one_that_stops_says_so(client: httpx.Client) -> None:
    steps = "".join(f"step {i} loss 2.{50 - i:02d}\n" for i in range(1, 9))
    r = submit(client, files={"log": (None, steps + "Training completed.\n")})
    html = client.get(r.headers["location"], headers=HTML).text
    assert "<h1>Looks healthy</h1>" in html and "<title>Looks healthy" in html
    assert "the run finished normally (line 9)" in html and "What to try next" not in html
    r = submit(client, files={"log": (None, steps)})
    html = client.get(r.headers["location"], headers=HTML).text
    assert "<h1>No error: the log stops mid-run</h1>" in html and "the log stops at step 8 (line 8)" in html
    assert "Which of the three it was" in html and "py-spy dump" in html


def test_the_timeline_orders_failures_across_ranks_in_time(client: httpx.Client) -> None:
    log = (
        "[2026-03-14 09:24:31,774] torch.distributed.elastic.multiprocessing.api: [WARNING] "
        "Sending process 48206 closing signal SIGTERM\n"
        "2026-03-14T09:24:29+00:00 [rank5]: torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.91 GiB. "
        "GPU 5 has a total capacity of 79.15 GiB of which 2.12 GiB is free.\n"
    )
    html = diagnosis_page(client, log)
    timeline = html.split("Timeline across ranks", 1)[1]
    assert timeline.index("CUDA out of memory") < timeline.index("terminated by the launcher")


def test_an_echoes_only_log_says_the_start_is_not_recognised(client: httpx.Client) -> None:
    """The launcher's SIGTERM and ChildFailedError alone: never shown as the initiating failure."""
    log = "\n".join(OOM_CASCADE.splitlines()[8:]) + "\n"
    html = diagnosis_page(client, log)
    assert "The failure that started it is not recognised" in html
    assert "Initiating failure" not in html
    assert "Collateral: echoes of the failure above" in html and "the unrecognised one" in html


CASES = REPO / "tests" / "corpus" / "cases"


def test_a_hang_page_names_the_suspect_rank_near_the_top(client: httpx.Client) -> None:
    """Ranks 0-2 time out in gloo, rank 3 of 4 never does (a real generated run)."""
    log = (CASES / "gen-dist-hang-rank3-of-4" / "log.txt").read_text()
    html = diagnosis_page(client, log)
    assert "Suspect rank: 3" in html and "rank 3 never does: the others were waiting for it" in html
    assert html.index('class="lead verdict"') < html.index("Suspect rank: 3") < html.index("Initiating failure")
    # The verdict, the page's first sentence, already names it.
    verdict = html.split('id="verdict">', 1)[1].split("</p>", 1)[0]
    assert "suspect rank 3, which the others were waiting for" in verdict, verdict


def test_the_environment_panel_shows_the_logs_facts_below_the_evidence(client: httpx.Client) -> None:
    """A real repro run's banner (pytorch/pytorch#122192): PyTorch, its CUDA and the GPU, each with its line."""
    log = (CASES / "gh-pytorch-pytorch-122192" / "log.txt").read_text()
    html = diagnosis_page(client, log)
    panel = html.split('class="panel environment"', 1)[1].split("</section>", 1)[0]
    assert "<dt>PyTorch</dt><dd><code>2.13.0.dev20260516+cu130</code>" in panel and "line 1" in panel
    assert "<dt>GPU</dt><dd><code>NVIDIA H100</code>" in panel and "line 3" in panel
    assert "Conflicts" not in panel
    # The answer first: the verdict and the evidence, then the environment (on a phone the
    # environment filled the first screen).
    assert html.index('id="verdict"') < html.index("<h3>Evidence</h3>") < html.index('class="panel environment"')


def test_the_environment_panel_names_the_host_of_nccls_lines(client: httpx.Client) -> None:
    """NVIDIA/nccl-tests#284's two nodes report drivers for different CUDA versions. NCCL's lines name
    hosts; the worker's own lines also state its rank ("ncclCommInitRank ... rank 1 nranks 2")."""
    r = submit(client, files={"log": (None, NCCL_TESTS_284)})
    html = client.get(r.headers["location"], headers=HTML).text
    panel = html.split('class="panel environment"', 1)[1].split("</section>", 1)[0]
    assert "<code>12.2</code> <span" in panel and "line 4, rank 1</span>" in panel
    assert "line 8, host agzen-master</span>" in panel
    assert "<h3>Conflicts the log proves</h3>" in panel and "nodes of one job report different cuda_driver" in panel


def test_a_time_without_a_year_is_shown_without_one(client: httpx.Client) -> None:
    """A real upstream NCCL watchdog paste: c10's "[E1206 18:44:12.715298 ...]" has no year."""
    log = (CASES / "gh-hiyouga-llamafactory-6269" / "log.txt").read_text()
    html = diagnosis_page(client, log)
    assert "12-06 18:44:12 (no year in the log)" in html
    assert "1900" not in html
    # "... ran for 600000 milliseconds before timing out": the collective began ten minutes earlier.
    assert "(began 12-06 18:34:12 (no year in the log), 10 min earlier)" in html


def test_a_glog_time_takes_the_year_of_the_log_s_other_times(client: httpx.Client) -> None:
    """torchrun's year-less lines and Python logging's 2026 lines in one real log: shown in 2026."""
    log = (CASES / "gen-dist-shape-error-logging" / "log.txt").read_text()
    html = diagnosis_page(client, log)
    assert "2026-12-01 14:" in html and "no year in the log" not in html and "1900" not in html
