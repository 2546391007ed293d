"""Messages a console hard-wrapped at a fixed width are read rejoined; nothing else changes."""

from __future__ import annotations

import io
from pathlib import Path

from app.core.engine.diagnose import diagnose
from app.core.engine.reader import iter_blocks
from app.core.engine.rewrap import rewrap, unmark, untag
from app.core.knowledge.loading import Library

WRAPPED = (
    b"Traceback (most recent call last):\r\n"
    b'  File "C:\\kohya_ss\\sd-scripts\\train_network.py", line 1012, in <module>\r\n'
    b"    trainer.train(args)\r\n"
    b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 h\r\n"
    b"as a total capacity of 8.00 GiB of which 0 bytes is free. Of the allocated memor\r\n"
    b"y 7.1 GiB is allocated by PyTorch.\r\n"
)


def test_a_wrapped_message_is_rejoined_on_its_first_line_and_every_line_keeps_its_number() -> None:
    found = rewrap(WRAPPED)
    assert found is not None and found.width == 80 and found.joined == (3,)
    lines = found.data.split(b"\n")
    assert len(lines) == len(WRAPPED.split(b"\n"))
    assert lines[3].startswith(b"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 MiB. GPU 0 has a")
    assert lines[3].endswith(b"y 7.1 GiB is allocated by PyTorch.\r")
    assert lines[4:] == WRAPPED.split(b"\n")[4:]  # the lines it was wrapped onto stay as they were


def test_the_diagnosis_says_it_read_the_message_rejoined(library: Library) -> None:
    (oom, *_) = diagnose(WRAPPED, library).candidates
    assert oom.id == "cuda.oom" and oom.line == 4
    assert "the console had wrapped the message of line 4 at 80 columns" in oom.why
    assert oom.evidence[0].text.endswith("allocated by PyTorch.")


def test_an_ordinary_log_is_left_alone() -> None:
    log = b"epoch 1 loss 0.5\n" * 3 + b"RuntimeError: CUDA error: an illegal memory access was encountered\n"
    assert rewrap(log) is None
    # lines as long as each other but no word broken across two: a table, not a wrap
    table = b"\n".join([b"| " + b"x" * 76 + b" |", b"| " + b"y" * 76 + b" |", b"+" + b"-" * 78 + b"+"]) + b"\n"
    assert rewrap(table) is None


# Progress lines of one template happen to be equally long; the abort after them is a line of its own
# (rwth-i6/returnn#1482), not the rest of the last one: joined, its OOM would hide behind the abort.
ABORTED = (
    b"ep 1 train, step 98, acc 0.004, loss 8.664, loss_att 8.846, loss_ctc 8.239, total 8.664, mem_usage:cuda:3 8.5GB, 0.801 sec/step\n"
    b"ep 1 train, step 98, acc 0.005, loss 8.674, loss_att 8.856, loss_ctc 8.248, total 8.674, mem_usage:cuda:0 8.9GB, 0.892 sec/step\n"
    b"ep 1 train, step 98, acc 0.003, loss 8.459, loss_att 8.575, loss_ctc 8.190, total 8.459, mem_usage:cuda:2 8.8GB, 0.834 sec/step\n"
    b"terminate called after throwing an instance of 'c10::Error'\n"
    b"  what():  CUDA error: out of memory\n"
)


def test_the_lines_a_process_abort_prints_start_records_of_their_own(library: Library) -> None:
    assert rewrap(ABORTED) is None
    assert rewrap(ABORTED.replace(b"terminate called", b"free(): invalid pointer\nterminate called")) is None
    (first, *_) = diagnose(ABORTED, library).candidates
    assert first.id == "cuda.oom" and first.line == 5


def test_box_lines_as_wide_as_the_window_are_not_joined() -> None:
    box = b"+" + b"-" * 78 + b"+\n"
    log = box + b"| NVIDIA-SMI 535.54      Driver Version: 535.54      CUDA Version: 12.2        |\n" + box
    log += b"RuntimeError: CUDA error: out of memory. Compile with TORCH_USE_CUDA_DSA to enab\nle device-side assertions.\n"
    log += b"OSError: [Errno 28] No space left on device: '/data/ckpt/step_1/model-00001-of-0\n0004.safetensors'\n"
    found = rewrap(log)
    assert found is not None and found.joined == (3, 5)


def test_only_a_paste_is_looked_at_never_a_log_of_several_chunks() -> None:
    big = WRAPPED * 40
    (chunk,) = list(iter_blocks(big))
    assert chunk.rejoined
    several = list(iter_blocks(big, block=1024))
    assert len(several) > 1 and not any(c.rejoined for c in several)  # type: ignore[union-attr]


def test_markdown_marks_around_a_whole_line_are_not_the_programs_output(library: Library) -> None:
    """A paste copied from an issue's markdown: the bold around the line hid it from the shell's pattern."""
    paste = b"WARNING [11/11 17:54:09 d2.config.compat]: Config has no VERSION.\n\n**Segmentation fault**\n"
    assert unmark(paste) == paste.replace(b"**", b"")
    (segfault,) = diagnose(paste, library).candidates
    assert (segfault.id, segfault.line) == ("proc.segfault", 3)
    kept = b"*****************\n**a** and **b**\nuse `torch.load` here\n"
    assert unmark(kept) is None  # rules, two bold words, code inside a sentence: left as written
    assert unmark(b"  `Killed`\r\n") == b"  Killed\r\n"


# Open MPI tags each piece of output it forwards: faulthandler's frames, written field by field,
# carry the tag again inside the line (horovod/horovod#2403, shortened).
SPLIT_BY_TAGS = (
    b'[1,0]<stderr>:  File "/usr/l[1,0]<stderr>:ocal/lib64/pytho[1,0]<stderr>:n3.6/session.py", line 956[1,0]<stderr>: in run\n'
    b"[1,1]<stdout>:step 10 loss 0.5\n"
    b"[1,0]<stderr>:RuntimeError: CUDA out of me[1,0]<stderr>:mory. Tried to allocate 2.00 GiB\n"
)


def test_a_launchers_tag_repeated_inside_a_line_is_dropped_and_lines_keep_their_numbers() -> None:
    found = untag(SPLIT_BY_TAGS)
    assert found is not None and found.lines == (0, 2)
    lines = found.data.split(b"\n")
    assert lines[0] == b'[1,0]<stderr>:  File "/usr/local/lib64/python3.6/session.py", line 956 in run'
    assert lines[1] == b"[1,1]<stdout>:step 10 loss 0.5"
    assert lines[2] == b"[1,0]<stderr>:RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB"
    # another rank's tag inside a line is that rank's text, not a repeat: left alone
    assert untag(b"[1,0]<stderr>:text [1,1]<stderr>: more\n") is None
    assert untag(b"no tags here\n") is None


def test_the_diagnosis_reads_a_line_split_by_tags_and_says_so(library: Library) -> None:
    found = diagnose(SPLIT_BY_TAGS, library)
    (oom, *_) = found.candidates
    assert oom.id == "cuda.oom" and oom.line == 3 and oom.rank == 0
    assert found.input.untagged_lines == 2
    assert "2 line(s) had a launcher's output tag again mid-line: read without it." in found.input.reading_notes()


def test_a_paste_with_no_newline_at_its_end_is_still_read_as_printed(library: Library, tmp_path: Path) -> None:
    """A form or an editor often drops the last newline: the last line must not become a chunk of
    its own, which made the paste look like a log of several chunks and left it unread as printed."""
    paste = SPLIT_BY_TAGS.rstrip(b"\n")
    (chunk,) = list(iter_blocks(paste))
    assert chunk.untagged == (0, 2)  # type: ignore[union-attr]
    path = tmp_path / "paste.log"
    path.write_bytes(WRAPPED.rstrip(b"\r\n"))
    (chunk,) = list(iter_blocks(path))
    assert chunk.rejoined  # type: ignore[union-attr]
    found = diagnose(paste, library)
    assert found.input.untagged_lines == 2 and found.input.lines == 3
    assert found.candidates[0].id == "cuda.oom"


def test_the_last_line_of_a_larger_log_with_no_newline_is_kept_whole() -> None:
    log = b"".join(b"step %d loss 0.5\n" % i for i in range(300)) + b"RuntimeError: the last line"
    for source in (log, io.BytesIO(log)):
        chunks = list(iter_blocks(source, block=1024))
        assert len(chunks) > 1
        assert b"".join(c.data for c in chunks) == log  # type: ignore[union-attr]
        assert sum(c.newlines for c in chunks) == 300  # type: ignore[union-attr]
