"""`tracelore corpus add` and `tracelore eval`: a small corpus gives exactly its figures, and the
measured counts reach the signature's page and JSON.

The fixture corpus is cut from the library's own real match examples (each one's top candidate is
its own signature, which the lint checks); its labels are what make a case right, wrong or a false
alarm.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from app.cli import main
from app.core.knowledge.loading import MEASURED_FILE, NEIGHBOURS_FILE, Library, load_library
from app.errors import CorpusError
from app.evaluation.corpus import CASE_FILE, CaseSpec, add_case, load_corpus
from app.evaluation.evaluate import evaluate, measured_document
from app.evaluation.neighbours import corpus_neighbours
from tests.conftest import database_for
from tests.support import REPO, LiveServer, live_server, make_settings

CORPUS = REPO / "tests" / "corpus"


def run(*args: str, input: bytes | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input)


def example(library: Library, sig_id: str) -> bytes:
    return library.signatures[sig_id].examples.match[0].log.encode()


def write_case(root: Path, case_id: str, log: bytes, **spec: object) -> None:
    spec = {"source": "https://example.org/thread/1", "notes": "labelled for the fixture corpus", **spec}
    add_case(root, case_id, [("log", log)], CaseSpec.model_validate(spec))


@pytest.fixture
def small_corpus(tmp_path: Path, library: Library) -> Path:
    """A right case, a wrong one and a healthy log with a false alarm."""
    root = tmp_path / "corpus"
    write_case(root, "right-oom", example(library, "cuda.oom"), expected="cuda.oom")
    write_case(root, "wrong-truncated", example(library, "checkpoint.truncated"), expected="storage.disk_full")
    write_case(root, "healthy-but-oom", example(library, "cuda.oom"), expected="none")
    return root


def test_eval_reports_exactly_the_small_corpus_figures(small_corpus: Path, signatures_dir: Path) -> None:
    result = run("eval", str(small_corpus), "--format", "json", "--signatures", str(signatures_dir))
    assert result.exit_code == 0, result.output
    body = json.loads(result.output)
    figures = {name: (f["hits"], f["total"]) for name, f in body["figures"].items()}
    assert figures == {
        "top1": (1, 2),
        "top3": (1, 2),
        "collateral_order": (0, 0),
        "healthy_clean": (0, 1),
        "order_independent": (0, 0),
        "rank_right": (0, 0),
    }
    assert body["signatures"]["cuda.oom"] | {"recall": None, "precision": None} == {
        "cases": 1,
        "recognised": 1,
        "named_wrongly": 0,
        "false_alarms": 1,
        "healthy": 1,
        "echo_cases": 0,
        "first_sight_cases": 0,
        "first_sight_right": 0,
        "recall": None,
        "precision": None,
    }
    assert body["signatures"]["cuda.oom"]["recall"] == 1.0
    assert body["signatures"]["checkpoint.truncated"]["named_wrongly"] == 1
    assert body["signatures"]["checkpoint.truncated"]["precision"] == 0.0
    assert body["signatures"]["storage.disk_full"]["cases"] == 1
    assert body["signatures"]["storage.disk_full"]["recall"] == 0.0
    assert body["confusions"] == [
        {"expected": "none", "got": "cuda.oom", "count": 1},
        {"expected": "storage.disk_full", "got": "checkpoint.truncated", "count": 1},
    ]
    assert {m["case"] for m in body["misses"]} == {"wrong-truncated", "healthy-but-oom"}


def test_eval_text_names_each_miss_and_only_filters(small_corpus: Path, signatures_dir: Path) -> None:
    text = run("eval", str(small_corpus), "--signatures", str(signatures_dir)).output
    assert "top1              0.500 (1/2)" in text
    assert "wrong-truncated: expected storage.disk_full, got checkpoint.truncated" in text
    assert "healthy-but-oom: expected none, got cuda.oom" in text
    only = json.loads(run("eval", str(small_corpus), "--only", "right", "--format", "json").output)
    assert only["cases"] == 1 and only["figures"]["top1"]["value"] == 1.0


def test_eval_exits_1_below_a_threshold_and_0_at_it(small_corpus: Path, signatures_dir: Path) -> None:
    (small_corpus / "thresholds.yaml").write_text("top1: 0.5\nhealthy_clean: 0.0\n")
    assert run("eval", str(small_corpus), "--signatures", str(signatures_dir)).exit_code == 0
    (small_corpus / "thresholds.yaml").write_text("top1: 0.6\n")
    result = run("eval", str(small_corpus), "--signatures", str(signatures_dir))
    assert result.exit_code == 1
    assert "FAILED: top1 0.500 is below the threshold 0.600" in result.output


def test_a_malformed_corpus_is_refused_with_every_problem_located(tmp_path: Path) -> None:
    root = tmp_path / "corpus" / "cases"
    (root / "no-log").mkdir(parents=True)
    (root / "no-log" / CASE_FILE).write_text("source: https://e.org/1\nexpected: cuda.oom\nnotes: why it is so\n")
    (root / "bad-label").mkdir()
    (root / "bad-label" / "log.txt").write_text("x\n")
    (root / "bad-label" / CASE_FILE).write_text("source: my memory\nexpected: Out Of Memory\nnotes: why it is so\n")
    result = run("eval", str(tmp_path / "corpus"))
    assert result.exit_code == 2
    assert "no-log: no log.txt" in result.output
    assert "bad-label: source" in result.output and "bad-label: expected" in result.output
    with pytest.raises(CorpusError):
        load_corpus(tmp_path / "corpus")


def test_thresholds_must_be_known_figures(small_corpus: Path) -> None:
    (small_corpus / "thresholds.yaml").write_text("top_one: 0.9\n")
    result = run("eval", str(small_corpus))
    assert result.exit_code == 2 and "unknown figure 'top_one'" in result.output


def test_corpus_add_redacts_and_refuses_to_overwrite(tmp_path: Path, library: Library) -> None:
    log = tmp_path / "paste.txt"
    secret = "hf_aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
    log.write_bytes(example(library, "cuda.oom") + f"\nHF_TOKEN={secret}\n".encode())
    args = ["corpus", "add", "gh-o-r-1", str(log), "--corpus", str(tmp_path / "c"), "--expected", "cuda.oom"]
    args += ["--source", "https://github.com/o/r/issues/1", "--notes", "the thread found a batch too large"]
    first = run(*args, "--collateral", "nccl.watchdog_timeout", "--tag", "multi-rank")
    assert first.exit_code == 0, first.output
    case_dir = tmp_path / "c" / "cases"
    stored = (case_dir / "gh-o-r-1" / "log.txt").read_text()
    assert secret not in stored and "[REDACTED:" in stored
    spec = yaml.safe_load((case_dir / "gh-o-r-1" / CASE_FILE).read_text())
    assert spec["collateral"] == ["nccl.watchdog_timeout"] and spec["tags"] == ["multi-rank"]
    again = run(*args)
    assert again.exit_code == 2 and "exists already" in again.output
    bad = run(*args[:-6], "--source", "from memory", "--expected", "cuda.oom", "--notes", "some reason here")
    assert bad.exit_code == 2 and "public http(s) URL" in bad.output


def test_per_rank_files_are_one_job(tmp_path: Path, library: Library) -> None:
    root = tmp_path / "corpus"
    pairs = [("rank1.log", example(library, "nccl.watchdog_timeout")), ("rank0.log", example(library, "cuda.oom"))]
    spec = CaseSpec(
        source="https://e.org/2", expected="cuda.oom", collateral=("nccl.watchdog_timeout",), notes="x" * 12
    )
    case = add_case(root, "two-ranks", pairs, spec)
    assert [p.name for p in case.logs] == ["rank0.log", "rank1.log"]
    report = evaluate(load_corpus(root), library)
    assert (report.top1.hits, report.collateral_order.hits, report.collateral_order.total) == (1, 1, 1)


@pytest.fixture
def measured_library(small_corpus: Path, signatures_dir: Path, tmp_path: Path) -> Library:
    copy = tmp_path / "signatures"
    shutil.copytree(signatures_dir, copy)
    result = run("eval", str(small_corpus), "--signatures", str(copy), "--write-measured")
    assert result.exit_code == 0, result.output
    return load_library(copy)


def test_measured_counts_load_with_the_library_they_were_taken_on(measured_library: Library, tmp_path: Path) -> None:
    oom = measured_library.measured["cuda.oom"]
    assert (oom.cases, oom.recognised, oom.named_wrongly, oom.false_alarms, oom.healthy) == (1, 1, 0, 1, 1)
    assert oom.sentence() == (
        "Recognised 1 of 1 real log; named wrongly in 0 logs of other failures; 1 false alarm in 1 healthy logs."
        " Fewer than 3 real logs are behind these figures: too few to trust them yet."
    )
    # Another version of the library (an edited signature) shows no stale figures.
    root = measured_library.paths["cuda.oom"].parents[1]
    path = measured_library.paths["cuda.oom"]
    path.write_text(path.read_text().replace("title: CUDA out of memory", "title: CUDA out of device memory", 1))
    assert load_library(root).measured == {}


@pytest.fixture
def measured_server(request: pytest.FixtureRequest, measured_library: Library, tmp_path: Path) -> Iterator[LiveServer]:
    with live_server(make_settings(database_for("sqlite", request, tmp_path), tmp_path), measured_library) as live:
        yield live


def test_the_page_and_json_of_a_signature_show_what_was_measured(measured_server: LiveServer) -> None:
    with measured_server.client() as c:
        page = c.get("/failures/cuda.oom", headers={"Accept": "text/html"})
        assert page.status_code == 200
        assert "Measured on real logs:" in page.text and "Recognised 1 of 1 real log" in page.text
        assert "too few to trust them yet" in page.text
        entry = c.get("/api/v1/signatures/cuda.oom").json()
        assert entry["measured"]["cases"] == 1 and entry["measured"]["false_alarms"] == 1
        assert entry["measured"]["summary"].startswith("Recognised 1 of 1")
        unmeasured = c.get("/api/v1/signatures/storage.disk_full").json()["measured"]
        assert unmeasured["cases"] == 1 and unmeasured["recognised"] == 0


def test_build_site_writes_the_measured_counts(measured_library: Library, tmp_path: Path) -> None:
    root = measured_library.paths["cuda.oom"].parents[1]
    out = tmp_path / "site"
    assert run("build-site", str(out), "--signatures", str(root)).exit_code == 0
    html = (out / "failures" / "cuda.oom.html").read_text()
    assert "Recognised 1 of 1 real log" in html
    entry = json.loads((out / "api" / "v1" / "signatures" / "cuda.oom.json").read_text())
    assert entry["measured"]["recognised"] == 1


def test_the_shipped_measurements_are_those_of_the_corpus(library: Library) -> None:
    """signatures/measured.json is what `tracelore eval --write-measured` gives today."""
    shipped = json.loads((REPO / "signatures" / MEASURED_FILE).read_text())
    fresh = measured_document(evaluate(load_corpus(CORPUS), library), library)
    assert shipped == fresh, "run `tracelore eval --write-measured` and commit signatures/measured.json"
    assert library.measured, "the shipped library loads its measurements"


def test_every_corpus_case_is_labelled_with_a_taxonomy_id(library: Library) -> None:
    taxonomy = yaml.safe_load((REPO / "signatures" / "taxonomy.yaml").read_text())
    known = {entry["id"] for entries in taxonomy.values() for entry in entries}
    shared = REPO.parent / "shared" / "taxonomy.yaml"  # the product's full list, where present
    if shared.is_file():
        known |= {e["id"] for entries in yaml.safe_load(shared.read_text()).values() for e in entries}
    for case in load_corpus(CORPUS):
        ids = {case.spec.expected, *case.spec.also_ok, *case.spec.collateral} - {"none"}
        assert ids <= known, f"{case.id}: {sorted(ids - known)} not in the taxonomy"


def test_a_baseline_shows_each_case_that_changed(small_corpus: Path, signatures_dir: Path, tmp_path: Path) -> None:
    """Relabelling a case turns it from right to wrong: the comparison names it and exits 1."""
    before = run("eval", str(small_corpus), "--format", "json", "--signatures", str(signatures_dir))
    baseline = tmp_path / "before.json"
    baseline.write_text(before.output)
    same = run("eval", str(small_corpus), "--baseline", str(baseline), "--signatures", str(signatures_dir))
    assert same.exit_code == 0 and "0 now right, 0 now wrong" in same.output
    spec = small_corpus / "cases" / "right-oom" / CASE_FILE
    spec.write_text(spec.read_text().replace("expected: cuda.oom", "expected: host.oom_killed"))
    spec = small_corpus / "cases" / "wrong-truncated" / CASE_FILE
    spec.write_text(spec.read_text().replace("expected: storage.disk_full", "expected: checkpoint.truncated"))
    changed = run("eval", str(small_corpus), "--baseline", str(baseline), "--signatures", str(signatures_dir))
    assert changed.exit_code == 1
    assert "1 now right, 1 now wrong" in changed.output
    assert "now right: wrong-truncated (checkpoint.truncated)" in changed.output
    assert "NOW WRONG: right-oom (expected host.oom_killed, got cuda.oom)" in changed.output


def test_multi_rank_cases_are_also_scored_in_shuffled_file_orders(tmp_path: Path, signatures_dir: Path) -> None:
    # Two real multi-rank cases: one logged per rank, one single log split by its rank prefixes.
    root = tmp_path / "corpus" / "cases"
    for case in ("gen-dist-per-rank-index-error", "gen-dist-hang-rank3-of-4"):
        shutil.copytree(CORPUS / "cases" / case, root / case)
    result = run("eval", str(tmp_path / "corpus"), "--format", "json", "--signatures", str(signatures_dir))
    figure = json.loads(result.output)["figures"]["order_independent"]
    assert (figure["hits"], figure["total"], figure["value"]) == (2, 2, 1.0)
    text = run("eval", str(tmp_path / "corpus"), "--signatures", str(signatures_dir)).output
    assert "order_independent 1.000 (2/2)" in text


def test_the_whole_corpus_is_order_independent(library: Library) -> None:
    report = evaluate(load_corpus(CORPUS), library)
    assert report.order_independent.total >= 50
    assert report.order_independent.value == 1.0, [o.case for o in report.outcomes if o.order_stable is False]


def test_a_subset_is_reported_but_not_held_to_the_thresholds(small_corpus: Path, signatures_dir: Path) -> None:
    (small_corpus / "thresholds.yaml").write_text("top1: 0.9\n")
    whole = run("eval", str(small_corpus), "--signatures", str(signatures_dir))
    subset = run("eval", str(small_corpus), "--only", "wrong", "--signatures", str(signatures_dir))
    assert whole.exit_code == 1 and subset.exit_code == 0
    assert "top1              0.000 (0/1)" in subset.output


def test_corpus_add_writes_a_local_prefix_under_its_neutral_name(tmp_path: Path, library: Library) -> None:
    log = tmp_path / "run.txt"
    log.write_bytes(
        b'  File "/srv/gen/venv/lib/python3.11/site-packages/torch/serialization.py", line 1634\n'
        + example(library, "checkpoint.truncated")
    )
    base = [
        "corpus",
        "add",
        "gen-x-truncated",
        str(log),
        "--corpus",
        str(tmp_path / "c"),
        "--expected",
        "checkpoint.truncated",
        "--source",
        "generated by tests/corpus/generators/x.py (torch)",
        "--notes",
        "the script cut the file",
    ]
    assert run(*base, "--alias", "/srv/gen/venv=/opt/venv").exit_code == 0
    stored = (tmp_path / "c" / "cases" / "gen-x-truncated" / "log.txt").read_text()
    assert "/opt/venv/lib/python3.11/site-packages/torch" in stored and "/srv/gen" not in stored
    bad = run(*base, "--replace", "--alias", "no-equals-sign")
    assert bad.exit_code == 2 and "LOCAL=NEUTRAL" in bad.output


def test_corpus_add_records_what_the_library_said_at_first_sight(tmp_path: Path, library: Library) -> None:
    """The first sight is taken on the log as committed (redacted), and kept with the sampling that found it."""
    log = tmp_path / "paste.txt"
    log.write_bytes(example(library, "cuda.oom"))
    args = ["corpus", "add", "gh-o-r-7", str(log), "--corpus", str(tmp_path / "c"), "--expected", "cuda.oom"]
    args += ["--source", "https://github.com/o/r/issues/7", "--notes", "the thread found a batch too large"]
    sampled = ["--batch", "2026-12-a", "--query", "pytorch out of memory", "--position", "3", "--ecosystem", "pytorch"]
    assert run(*args, *sampled).exit_code == 0
    spec = yaml.safe_load((tmp_path / "c" / "cases" / "gh-o-r-7" / CASE_FILE).read_text())
    first = spec["first_sight"]
    assert first["ranked"][0] == "cuda.oom" and "cuda.oom" in first["likely"] and first["known"] is True
    assert first["library"] == library.version and len(first["added"]) == 10
    assert spec["sampled"] == {
        "batch": "2026-12-a",
        "query": "pytorch out of memory",
        "position": 3,
        "ecosystem": "pytorch",
    }
    half = run(*args[:3], "gh-o-r-8", *args[4:], "--batch", "b")
    assert half.exit_code == 2 and "go together" in half.output


def test_first_sight_is_kept_when_the_label_is_a_class_with_no_signature_yet(tmp_path: Path, library: Library) -> None:
    log = tmp_path / "paste.txt"
    log.write_bytes(
        b"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while trying to allocate\n"
    )
    args = ["corpus", "add", "gh-o-r-9", str(log), "--corpus", str(tmp_path / "c"), "--expected", "xla.oom"]
    assert run(*args, "--source", "https://github.com/o/r/issues/9", "--notes", "the TPU ran out of HBM").exit_code == 0
    first = yaml.safe_load((tmp_path / "c" / "cases" / "gh-o-r-9" / CASE_FILE).read_text())["first_sight"]
    assert first["known"] is False


def test_corpus_import_adds_every_staged_case_with_its_first_sight(tmp_path: Path, library: Library) -> None:
    staged = tmp_path / "staged"
    for case_id, sig_id in (("gh-a-b-1", "cuda.oom"), ("gh-a-b-2", "checkpoint.truncated")):
        (staged / case_id).mkdir(parents=True)
        (staged / case_id / "log.txt").write_bytes(example(library, sig_id))
        spec = {
            "source": f"https://github.com/a/b/issues/{case_id[-1]}",
            "expected": sig_id,
            "notes": "what the thread found",
        }
        spec["sampled"] = {"batch": "t", "query": "a b crash", "position": int(case_id[-1])}
        (staged / case_id / CASE_FILE).write_text(yaml.safe_dump(spec))
    (staged / "gh-a-b-3").mkdir()
    (staged / "gh-a-b-3" / "log.txt").write_text("x\n")
    (staged / "gh-a-b-3" / CASE_FILE).write_text("source: nowhere\n")
    root = tmp_path / "c"
    result = run("corpus", "import", str(staged), "--corpus", str(root))
    assert result.exit_code == 1 and "added 2 cases" in result.output and "gh-a-b-3" in result.output
    again = run("corpus", "import", str(staged), "--corpus", str(root))
    assert "added 0 cases; 2 were in the corpus already" in again.output
    cases = load_corpus(root)
    assert [c.spec.first_sight.ranked[0] for c in cases if c.spec.first_sight] == ["cuda.oom", "checkpoint.truncated"]
    report = run("eval", str(root), "--format", "json")
    groups = {g["label"]: g for g in json.loads(report.output)["first_sight"]}
    assert groups["all"]["then"]["top1"]["hits"] == 2 and groups["batch t"]["known"] == 2
    text = run("eval", str(root)).output
    assert "first sight:" in text and "then  top-1 1.000 (2/2)" in text


def test_scoped_thresholds_are_read_and_checked(small_corpus: Path, signatures_dir: Path) -> None:
    (small_corpus / "thresholds.yaml").write_text("top1: 0.5\nsampled:\n  top1: 0.9\n")
    result = run("eval", str(small_corpus), "--signatures", str(signatures_dir))
    assert result.exit_code == 0, result.output  # no sampled case: nothing holds the scoped figure
    (small_corpus / "thresholds.yaml").write_text("sampled: 0.9\n")
    bad = run("eval", str(small_corpus), "--signatures", str(signatures_dir))
    assert bad.exit_code == 2 and "sampled must map figure names" in bad.output
    (small_corpus / "thresholds.yaml").write_text("sampled:\n  top_one: 0.9\n")
    bad = run("eval", str(small_corpus), "--signatures", str(signatures_dir))
    assert bad.exit_code == 2 and "unknown figure 'sampled.top_one'" in bad.output


def test_each_sampled_batch_is_held_to_its_own_thresholds(tmp_path: Path, library: Library) -> None:
    staged = tmp_path / "staged"
    logs = {"gh-a-b-1": ("t1", example(library, "cuda.oom")), "gh-a-b-2": ("t2", b"nothing to see here\n")}
    for case_id, (batch, log) in logs.items():
        (staged / case_id).mkdir(parents=True)
        (staged / case_id / "log.txt").write_bytes(log)
        spec = {
            "source": f"https://github.com/a/b/issues/{case_id[-1]}",
            "expected": "cuda.oom",
            "notes": "what the run did",
        }
        spec["sampled"] = {"batch": batch, "query": "a b out of memory", "position": 1}
        (staged / case_id / CASE_FILE).write_text(yaml.safe_dump(spec))
    root = tmp_path / "c"
    assert run("corpus", "import", str(staged), "--corpus", str(root)).exit_code == 0
    # A new batch (t2, missed) does not pull down the figures the earlier batch (t1) is held to.
    (root / "thresholds.yaml").write_text("sampled:\n  t1: {top1: 1.0, top3: 1.0}\n")
    held = run("eval", str(root))
    assert held.exit_code == 0, held.output
    assert "batch t1, as the library does on it now: 1 cases" in held.output
    assert "top1              1.000 (1/1)  (threshold 1.000)" in held.output
    parts = json.loads(run("eval", str(root), "--format", "json").output)["parts"]
    assert parts["sampled.t1"]["top1"]["threshold"] == 1.0 and parts["sampled.t2"]["top1"]["value"] == 0.0
    (root / "thresholds.yaml").write_text("sampled:\n  t1: {top1: 1.0}\n  t2: {top1: 0.5}\n")
    below = run("eval", str(root))
    assert below.exit_code == 1 and "sampled.t2.top1 0.000 is below the threshold 0.500" in below.output
    (root / "thresholds.yaml").write_text("sampled:\n  t9: {top1: 0.5}\n")
    misspelt = run("eval", str(root))
    assert misspelt.exit_code == 1 and "sampled.t9.top1 names a batch with no case" in misspelt.output


def test_an_ecosystem_two_batches_named_differently_is_one_row_of_coverage(tmp_path: Path, library: Library) -> None:
    staged = tmp_path / "staged"
    names = {"gh-a-b-1": "TensorFlow and Keras", "gh-a-b-2": "TensorFlow, Keras", "gh-a-b-3": "JAX"}
    for case_id, ecosystem in names.items():
        (staged / case_id).mkdir(parents=True)
        (staged / case_id / "log.txt").write_bytes(example(library, "cuda.oom"))
        spec = {
            "source": f"https://github.com/a/b/issues/{case_id[-1]}",
            "expected": "cuda.oom",
            "notes": "ran out of memory",
        }
        spec["sampled"] = {"batch": "t1", "query": "keras out of memory", "position": 1, "ecosystem": ecosystem}
        (staged / case_id / CASE_FILE).write_text(yaml.safe_dump(spec))
    root = tmp_path / "c"
    assert run("corpus", "import", str(staged), "--corpus", str(root)).exit_code == 0
    (root / "ecosystems.yaml").write_text("TensorFlow and Keras:\n  - TensorFlow, Keras\n")
    rows = json.loads(run("eval", str(root), "--format", "json").output)["coverage_by_ecosystem"]
    assert {r["label"]: r["cases"] for r in rows} == {"TensorFlow and Keras": 2, "JAX": 1}
    # The case keeps the ledger's wording; only the report joins them.
    assert "ecosystem: TensorFlow, Keras" in (root / "cases" / "gh-a-b-2" / CASE_FILE).read_text()


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("A:\n  - x\nB:\n  - x\n", "'x' is listed under both 'A' and 'B'"),
        ("A:\n  - B\nB:\n  - y\n", "'B' is reported under 'A' and has names of its own"),
        ("A: x\n", "'A' must map to a list of names"),
    ],
)
def test_a_contradictory_list_of_ecosystem_names_is_refused(tmp_path: Path, text: str, problem: str) -> None:
    (tmp_path / "cases").mkdir()
    (tmp_path / "ecosystems.yaml").write_text(text)
    with pytest.raises(CorpusError) as caught:
        load_corpus(tmp_path)
    assert any(problem in p for p in caught.value.problems), caught.value.problems


def test_every_ecosystem_name_of_the_shipped_corpus_is_reported_once() -> None:
    """Each name in ecosystems.yaml is one a case uses, so a list of names cannot rot."""
    raw = yaml.safe_load((CORPUS / "ecosystems.yaml").read_text())
    used = {
        s["sampled"]["ecosystem"]
        for p in (CORPUS / "cases").glob("*/case.yaml")
        if (s := yaml.safe_load(p.read_text())).get("sampled") and s["sampled"].get("ecosystem")
    }
    listed = [name for others in raw.values() for name in others]
    assert sorted(set(listed) - used) == []


def test_the_shipped_neighbours_are_those_of_the_corpus(library: Library) -> None:
    """signatures/neighbours.json indexes today's corpus, as `tracelore eval --write-measured` writes it."""
    shipped = json.loads((REPO / "signatures" / NEIGHBOURS_FILE).read_text())
    fresh = corpus_neighbours(load_corpus(CORPUS), library).to_json()
    assert shipped == fresh, "run `tracelore eval --write-measured` and commit signatures/neighbours.json"


UNKNOWN_FAILURE = b"step 3\nFrobnicatorError: widget arena exhausted while packing quux tensors\n"


def test_a_lead_never_comes_from_the_case_own_thread(signatures_dir: Path, tmp_path: Path) -> None:
    """Each case is measured as an unseen log: its own thread's logs never lead it (leave one thread out)."""
    root = tmp_path / "corpus"
    other = b"GizmoError: spool device rejected the zorblax segment write\n"  # words no other case shares
    write_case(root, "thread-c", other, expected="storage.disk_full", source="https://github.com/o/r/issues/3")
    write_case(root, "thread-a", UNKNOWN_FAILURE, expected="cuda.oom", source="https://github.com/o/r/issues/1")
    write_case(root, "thread-a-again", UNKNOWN_FAILURE, expected="cuda.oom", source="https://github.com/o/r/issues/1")
    copy = tmp_path / "signatures"
    shutil.copytree(signatures_dir, copy)
    alone = run("eval", str(root), "--signatures", str(copy), "--write-measured", "--format", "json")
    body = json.loads(alone.stdout)
    assert body["leads"] == {"hits": 0, "total": 0}
    assert [o["ranked"] for o in body["outcomes"]] == [[], [], []]
    # Another thread with the same failure: each now leads the other, right, and marked as leads.
    write_case(root, "thread-b", UNKNOWN_FAILURE, expected="cuda.oom", source="https://github.com/o/r/issues/2")
    both = run("eval", str(root), "--signatures", str(copy), "--write-measured", "--format", "json")
    body = json.loads(both.stdout)
    assert body["leads"] == {"hits": 3, "total": 3}
    led = [o for o in body["outcomes"] if o["expected"] == "cuda.oom"]
    assert len(led) == 3 and all(o["lead"] and o["ok"] and o["ranked"] == ["cuda.oom"] for o in led)
    # A lead is not the signature's doing: its measured counts say it recognised none of them.
    oom = load_library(copy).measured["cuda.oom"]
    assert (oom.cases, oom.recognised, oom.named_wrongly) == (3, 0, 0)
