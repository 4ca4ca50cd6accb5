"""verify's progress on stderr: a live line on a terminal only (tested on a real pty), the same
start and end lines everywhere, nothing else in a pipe."""

import io
import json
import os
import pty

from records_by_hand import make_run, ups

from distlint.verify.launch import LaunchPlan
from distlint.verify.report import Progress


def _feed(progress, tmp_path, summary):
    """One run as verify drives the progress: start, polls while records arrive, end, compare."""
    plan = LaunchPlan("2 processes", 2, "torchrun", "cpu", ["torchrun"], {})
    records = tmp_path / "records"
    records.mkdir()
    progress("start", (plan, {"updates": 20, "samples": 0}))
    progress("poll", (plan, str(records), 0.2))  # nothing recorded yet
    for rank in (0, 1):
        with open(records / f"{100 + rank}.jsonl", "w", encoding="utf-8") as f:
            for n in (1, 2, 3):
                f.write(json.dumps({"kind": "loss", "value": 0.5 / n}) + "\n")
                f.write(json.dumps({"kind": "step", "n": n, "samples": 8}) + "\n")
            f.write('{"kind": "step", "n": 4, "sam')  # a line still being written
    progress("poll", (plan, str(records), 0.4))  # within the redraw interval: not drawn
    progress("poll", (plan, str(records), 1.5))
    progress("end", summary)
    progress("compare", None)
    progress("done", None)


def _read_all(fd):
    out = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except OSError:  # EIO: the other end is closed and everything was read
            break
        if not chunk:
            break
        out += chunk
    return out.decode()


def test_a_terminal_gets_one_live_line_per_run(tmp_path):
    summary = make_run(tmp_path, "many", 2, [ups([1.0, 0.9])] * 2)
    leader, follower = pty.openpty()
    with open(follower, "w", encoding="utf-8", closefd=True) as stream:
        progress = Progress(stream)
        assert progress.live  # a real terminal
        _feed(progress, tmp_path, summary)
    text = _read_all(leader)
    os.close(leader)
    lines = text.replace("\r\n", "\n").split("\n")
    assert lines[0] == "distlint verify: running 2 processes (torchrun) ..."
    live = [p for p in text.split("\r\x1b[K") if p.startswith("  ") and "\n" not in p]
    assert live[:3] == [
        "  2 processes (torchrun): update 0/20, 0 s",  # starting up: elapsed time only
        "  2 processes (torchrun): update 3/20, loss 0.1667, 2 s",
        "  comparing the runs ...",
    ]
    assert text.count("update 3/20") == 1  # the poll inside the interval drew nothing
    assert "  2 processes: 2 updates, 32 samples in 10.0 s, ok" in text
    assert text.endswith("\r\x1b[K")  # the line is taken off the screen before the report


def test_a_run_stopped_at_a_sample_count_shows_samples_out_of_planned(tmp_path):
    stream = io.StringIO()
    progress = Progress(stream, live=True)
    plan = LaunchPlan("1 process", 1, "python", "cpu", ["python"], {})
    records = tmp_path / "r"
    records.mkdir()
    (records / "7.jsonl").write_text(
        "".join(json.dumps({"kind": "step", "n": n, "samples": 8}) + "\n" for n in (1, 2)),
        encoding="utf-8",
    )
    progress("start", (plan, {"updates": 160, "samples": 160}))
    progress("poll", (plan, str(records), 3.0))
    assert stream.getvalue().endswith("\r\x1b[K  1 process (python): samples 16/160, 3 s")


def test_a_pipe_gets_the_start_and_end_lines_only(tmp_path):
    summary = make_run(tmp_path, "many", 2, [ups([1.0, 0.9])] * 2)
    reader, writer = os.pipe()
    with open(writer, "w", encoding="utf-8") as stream:
        progress = Progress(stream)
        assert not progress.live
        _feed(progress, tmp_path, summary)
    with open(reader, encoding="utf-8") as f:
        text = f.read()
    assert text == (
        "distlint verify: running 2 processes (torchrun) ...\n"
        "  2 processes: 2 updates, 32 samples in 10.0 s, ok\n"
    )
