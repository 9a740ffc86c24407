"""Live reports: a log read piece by piece as it grows, `tlparse-py watch`, `run --live`.

The promises checked here: a log read in pieces gives exactly the records of one read; the live
report's final state is byte for byte the one-shot report; the banner's facts are the raw log's;
unchanged pages are not rewritten; and every bad input of the issue ends in one clear line.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import TRACES, read_json
from logs import cid, line, metrics
from test_program_exit import without_program_exit
from tlparse_py.live import LiveReport
from tlparse_py.model import DiagnosticLog, Stats, StringTable
from tlparse_py.options import Options
from tlparse_py.pipeline import write_report
from tlparse_py.reading.records import LogReader
from tlparse_py.reading.tail import LogReset, LogTail

HAS_TORCH = importlib.util.find_spec("torch") is not None
REPO = Path(__file__).resolve().parent.parent
LIVE_MARK = '<meta name="tlparse-live"'


def fixture_bytes(name: str) -> bytes:
    path = sorted((TRACES / name).glob("dedicated_log*"))[0]
    data = path.read_bytes()
    return gzip.decompress(data) if path.name.endswith(".gz") else data


def damaged_log() -> bytes:
    """A real log with every kind of damage the reader counts: junk lines (a few, and a run),
    CRLF line ends, a payload whose md5 does not match, orphan payload, a bad envelope, and a
    record cut off at the end."""
    lines = fixture_bytes("killed_midcompile").split(b"\n")
    out: list[bytes] = []
    for number, text in enumerate(lines):
        out.append(text)
        if number == 30:
            out += [b"garbage line"] * 3
        if number == 60:
            out += [b"junk %d" % k for k in range(20)]
        if number == 90:
            out += [b"", b"\tstray payload"]
        if number == 120:
            out.append(b"V1203 12:00:00.000000 1 x.py:1] {not json")
    data = b"\r\n".join(out[:200]) + b"\n" + b"\n".join(out[200:])
    cut = data.find(b"\n\t", 50_000)
    data = data[: cut + 2] + b"Z" + data[cut + 3 :]  # one payload byte changed: its md5 no longer matches
    return data + b'\nV1203 12:00:00.000000 1 x.py:1] {"has_payload": "abc"}\n\tpartial'


def one_read(path: Path):
    stats, diagnostics = Stats(), DiagnosticLog()
    records = [_facts(r) for r in LogReader(path, stats, diagnostics, strings=StringTable(), scanning_child=False).records()]
    return records, dict(stats.counts), [(d.lineno, d.problem, d.detail) for d in diagnostics.kept]


def _facts(record):
    return (record.lineno, record.kinds, record.envelope, record.payload, record.payload_md5, record.timestamp,
            record.pid, record.pathname, record.source_line, record.other_rank)


@pytest.mark.parametrize("name", ["killed_midcompile", "training", "graph_break", "damaged"])
def test_a_log_read_in_pieces_as_it_grows_gives_what_one_read_gives(tmp_path, name):
    data = damaged_log() if name == "damaged" else fixture_bytes(name)
    whole = tmp_path / "whole.log"
    whole.write_bytes(data)
    expected = one_read(whole)
    for seed in range(3):  # pieces of every size, cutting lines, payloads and CRLFs anywhere
        pieces = random.Random(seed)
        growing = tmp_path / f"growing{seed}.log"
        growing.write_bytes(b"")
        stats, diagnostics = Stats(), DiagnosticLog()
        tail = LogTail(growing, stats, diagnostics, StringTable())
        records, position = [], 0
        while position < len(data):
            size = pieces.choice([1, 7, 100, 1000, 5000, 60_000, 200_000])
            with open(growing, "ab") as handle:
                handle.write(data[position : position + size])
            position += size
            records += [_facts(r) for r in tail.read()]
        records += [_facts(r) for r in tail.read(final=True)]
        assert (records, dict(stats.counts), [(d.lineno, d.problem, d.detail) for d in diagnostics.kept]) == expected


def test_a_record_whose_payload_is_still_being_written_waits_for_it(tmp_path):
    log = tmp_path / "log"
    payload = "line one\nline two\nline three"
    record = line({"artifact": {"name": "x", "encoding": "string"}, **cid()}, payload)
    log.write_text(record[: record.index("line two")])
    tail = LogTail(log, Stats(), DiagnosticLog(), StringTable())
    assert list(tail.read()) == []  # its md5 does not match yet: not read
    with open(log, "a") as handle:
        handle.write(record[record.index("line two") :])
    records = list(tail.read())
    assert [r.payload for r in records] == [payload.encode()] and tail.reader.stats["fail_payload_md5"] == 0
    with open(log, "a") as handle:
        handle.write(line({"dynamo_start": {"stack": []}, **cid(1)}))  # no payload: whole as soon as its line is
    assert [r.lineno for r in tail.read()] == [5]


def test_a_log_that_shrinks_or_is_replaced_or_rewritten_cannot_be_continued(tmp_path):
    log = tmp_path / "log"
    log.write_text(line({"dynamo_start": {"stack": []}, **cid()}) * 3)
    for damage, says in [
        (lambda: log.write_text("V"), "shrank"),
        # a new file at the path (its inode may be the old one's, reused: then its bytes tell)
        (lambda: (log.unlink(), log.write_text(line({"dynamo_start": {"stack": []}, **cid(1)}) * 4)), "replaced|changed before byte"),
        (lambda: log.write_bytes(log.read_bytes().replace(b"V1202", b"V1203") + b"more\n"), "changed before byte"),
    ]:
        tail = LogTail(log, Stats(), DiagnosticLog(), StringTable())
        assert len(list(tail.read())) >= 3
        damage()
        with pytest.raises(LogReset, match=says):
            list(tail.read())
        log.write_text(line({"dynamo_start": {"stack": []}, **cid()}) * 3)


# -- the live report ends as the one-shot report ----------------------------------------------------


def tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def grow_live(log: Path, data: bytes, out: Path, seed: int = 1, check=None) -> LiveReport:
    live = LiveReport(log, out, Options())
    pieces, position = random.Random(seed), 0
    log.write_bytes(b"")
    while position < len(data):
        size = pieces.choice([100, 5000, 60_000, 300_000])
        with open(log, "ab") as handle:
            handle.write(data[position : position + size])
        position += size
        live.update("test", live.read())
        if check is not None:
            check(out)
    return live


def live_pages_agree_with_live_js(out: Path) -> None:
    """Every page written so far says which version it is, and live.js lists that version."""
    text = (out / "live.js").read_text()
    state = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    assert state["done"] is False and state["pages"]
    for page, version in state["pages"].items():
        head = (out / page).read_text()[:4096]
        assert f'data-page="{page}" data-version="{version}"' in head, page
    assert 'id="live-banner"' in (out / "index.html").read_text()


@pytest.mark.parametrize("name", ["killed_midcompile", "graph_break", "recompile", "training", "export_compile"])
def test_the_live_report_ends_byte_for_byte_as_the_one_shot_report(tmp_path, name):
    log = tmp_path / "trace" / "dedicated_log_torch_trace_x.log"
    log.parent.mkdir()
    live = grow_live(log, fixture_bytes(name), tmp_path / "live", check=live_pages_agree_with_live_js)
    live.finish()
    live.close()
    write_report(log, tmp_path / "one_shot")
    final, one_shot = tree(tmp_path / "live"), tree(tmp_path / "one_shot")
    assert sorted(final) == sorted(one_shot)
    assert [path for path in final if final[path] != one_shot[path]] == []
    assert not any(LIVE_MARK.encode() in content for content in final.values())


@pytest.mark.parametrize("name", ["recompile", "graph_break"])
def test_live_compile_pages_show_inline_what_the_final_report_shows(tmp_path, name):
    """--inline-mb is the report's: a live report's compile pages show inline the texts the report
    they become shows, within one budget across updates (each update had a budget of its own: of the
    87 texts that report links at 0.01 MB, recompile fixture, live pages linked 27 and showed 60)."""
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(fixture_bytes(name))
    options = Options(inline_mb=0.01)
    write_report(log, tmp_path / "one_shot", options=options)
    linked = "of text (--inline-mb)"
    pages = sorted(p.relative_to(tmp_path / "one_shot").as_posix() for p in (tmp_path / "one_shot").glob("*/index.html"))
    final = {page: (tmp_path / "one_shot" / page).read_text().count(linked) for page in pages}
    assert 0 < sum(final.values())
    live = LiveReport(log, tmp_path / "live", options)
    data, pieces, position = log.read_bytes(), random.Random(1), 0
    log.write_bytes(b"")
    while position < len(data):
        size = pieces.choice([100, 5000, 60_000])
        with open(log, "ab") as handle:
            handle.write(data[position : position + size])
        position += size
        live.update("test", live.read())
    assert {page: (tmp_path / "live" / page).read_text().count(linked) for page in pages} == final
    live.close()


def raw_facts(data: bytes) -> dict:
    """The banner's facts, from the log text alone: the last glog time, the frame compiles started,
    and those with no compilation_metrics."""
    started, ended, last = [], set(), None
    for text in data.decode().split("\n"):
        match = re.match(r"[VIWEC]\d{4} (\d\d:\d\d:\d\d)\.\d{6} \d+ [^ ]+\] (\{.*)", text)
        if not match:
            continue
        last = match.group(1)
        envelope = json.loads(match.group(2))
        ident = (envelope.get("frame_id"), envelope.get("frame_compile_id"))
        if "dynamo_start" in envelope and ident not in started:
            started.append(ident)
        if "compilation_metrics" in envelope:
            ended.add(ident)
    return {"last": last, "compiles": len(started), "open": [f"[{f}/{c}]" for f, c in started if (f, c) not in ended]}


def test_the_live_banner_says_what_the_log_says(tmp_path):
    data = fixture_bytes("killed_midcompile")  # the program was killed inside its second compile
    facts = raw_facts(data)
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(data)
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("the program (pid 1) is running.", live.read())
    html = (tmp_path / "out" / "index.html").read_text()
    banner = html[html.index('id="live-banner"') : html.index("</div>", html.index('id="live-banner"'))]
    text = re.sub(r"<[^>]+>", "", banner)
    assert f"last record {facts['last']}, {facts['compiles']} compiles so far" in text
    assert facts["open"] == ["[1/0]"]
    assert "compiling [1/0] " in text and 'href="-_1_0_0/index.html"' in banner
    live.close()


def test_pages_that_did_not_change_are_not_written_again(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_bytes(fixture_bytes("graph_break"))
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("running.", live.read())
    stamps = {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in (tmp_path / "out").rglob("*.html")}
    time.sleep(0.05)
    live.update("running.", live.read())  # nothing new
    assert {p: (p.stat().st_ino, p.stat().st_mtime_ns) for p in stamps} == stamps
    live.update("the program has exited.", live.read())  # the banner changed: the index only
    changed = [p.name for p in stamps if (p.stat().st_ino, p.stat().st_mtime_ns) != stamps[p]]
    assert changed == ["index.html"]
    live.close()


# -- tlparse-py watch -----------------------------------------------------------------------------


def tlparse(*args: str, cwd: Path, preexec_fn=None, **kwargs) -> subprocess.Popen:
    """The command in the background; its stderr goes to cwd/stderr.txt (read with `stderr_of`);
    `preexec_fn`: what the child does first besides (a limit on its file sizes...).

    Its Ctrl-C is the terminal's default, however the tests were started: a suite started in the
    background by a shell (`... &`) ignores SIGINT, and Python left ignoring it would not stop."""

    def prepare() -> None:  # in the child, before it runs Python (a signal call and the caller's: safe after fork)
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if preexec_fn is not None:
            preexec_fn()

    return subprocess.Popen([sys.executable, "-m", "tlparse_py", *args], cwd=cwd, stdout=subprocess.DEVNULL,
                            stderr=open(cwd / "stderr.txt", "w"), text=True, preexec_fn=prepare, **kwargs)


def finished(process: subprocess.Popen, cwd: Path, timeout: float = 60) -> str:
    """Wait for the command to end; its stderr."""
    process.wait(timeout=timeout)
    return stderr_of(cwd)


def stderr_of(cwd: Path) -> str:
    return (cwd / "stderr.txt").read_text()


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def records_of(pid: int, first_frame: int, count: int) -> str:
    """`count` whole compiles (start, graph, metrics) logged by process `pid`."""
    text = ""
    for frame in range(first_frame, first_frame + count):
        text += line({"dynamo_start": {"stack": [{"line": 3, "name": "f", "filename": 0}]}, **cid(frame)}, pid=pid)
        text += line({"dynamo_output_graph": {"sizes": {}}, **cid(frame)}, "def forward(self, x):\n    return x", pid=pid)
        text += metrics(frame).replace(" 4242 ", f" {pid} ")
    return text


@pytest.fixture
def writer():
    """A process standing for the program that writes the trace: alive until killed."""
    process = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    yield process
    process.kill()
    process.wait()


def live_index(out: Path) -> str:
    try:
        return (out / "index.html").read_text()
    except OSError:
        return ""


def test_watch_waits_for_a_path_that_does_not_exist_and_ctrl_c_writes_nothing(tmp_path):
    watch = tlparse("watch", str(tmp_path / "trace"), "-o", "out", "--no-browser", "--interval", "0.1", cwd=tmp_path)
    wait_for(lambda: "waiting for" in stderr_of(tmp_path))
    watch.send_signal(signal.SIGINT)
    err = finished(watch, tmp_path)
    assert watch.returncode == 130
    assert f"waiting for a trace log at {tmp_path / 'trace'}" in err and "nothing was written" in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_watch_follows_a_log_then_stops_when_its_writer_has_exited(tmp_path, writer):
    trace = tmp_path / "trace"
    trace.mkdir()
    log = trace / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 1))
    watch = tlparse("watch", str(trace), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    out = tmp_path / "out"
    wait_for(lambda: "1 compile so far" in live_index(out))
    assert f"the program (pid {writer.pid}) is running" in live_index(out)
    with open(log, "a") as handle:
        handle.write(records_of(writer.pid, 1, 2) + "this line is garbage\n")
    wait_for(lambda: "3 compiles so far" in live_index(out))
    assert "this line is garbage" in live_index(out) and "not a trace line" in live_index(out)  # shown like any damaged line
    assert watch.poll() is None  # the writer still runs: still watching
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    assert "is final" in err and "Traceback" not in err
    write_report(log, tmp_path / "one_shot")
    final, one_shot = tree(out), tree(tmp_path / "one_shot")
    assert sorted(final) == sorted(one_shot) and [p for p in final if final[p] != one_shot[p]] == []
    assert read_json(out / "summary.json")["stats"]["fail_glog"] == 1


def test_a_log_truncated_while_watched_is_read_again_from_the_start(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 3))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    wait_for(lambda: "3 compiles so far" in live_index(tmp_path / "out"))
    log.write_text(records_of(writer.pid, 7, 1))  # truncated, then a new run writes it
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    assert "shrank" in err and "reading it again from the start" in err and "Traceback" not in err
    summary = read_json(tmp_path / "out" / "summary.json")
    assert [c["id"] for c in summary["compiles"]] == ["[7/0]"]  # nothing of the first file
    write_report(log, tmp_path / "one_shot")
    assert tree(tmp_path / "out") == tree(tmp_path / "one_shot")


def delete_while_written(folder: Path) -> None:
    """`shutil.rmtree` of a folder the watch may still be writing into: a page's temporary file that
    it renames into place between the listing and the unlink is gone already (a race on a busy
    machine, not a failure), and the removal goes on."""
    def vanished_is_fine(function, path, exc_info):
        if not isinstance(exc_info[1], FileNotFoundError):
            raise exc_info[1]
    shutil.rmtree(folder, onerror=vanished_is_fine)


def test_deleting_the_report_folder_stops_the_watch(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 1))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", "--interval", "0.1", cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    delete_while_written(tmp_path / "out")
    err = finished(watch, tmp_path)
    assert watch.returncode == 1
    assert err.strip().splitlines()[-1] == "Error: the report folder out was deleted or replaced while watching; stopping (nothing was written there since)"


def test_ctrl_c_writes_the_final_report_of_what_was_read(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 2))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", "--interval", "0.1", cwd=tmp_path)
    wait_for(lambda: "2 compiles so far" in live_index(tmp_path / "out"))
    watch.send_signal(signal.SIGINT)
    err = finished(watch, tmp_path)
    assert watch.returncode == 130 and "Traceback" not in err
    assert "final for what was read" in err
    assert not (tmp_path / "out" / "live.js").exists() and LIVE_MARK not in live_index(tmp_path / "out")
    write_report(log, tmp_path / "one_shot")
    assert tree(tmp_path / "out") == tree(tmp_path / "one_shot")


def test_watch_refuses_a_gzipped_log(tmp_path):
    log = tmp_path / "dedicated_log_torch_trace_x.log.gz"
    log.write_bytes(gzip.compress(records_of(1, 0, 1).encode()))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", cwd=tmp_path)
    err = finished(watch, tmp_path)
    assert watch.returncode == 2 and "is gzipped, so it is finished" in err and not (tmp_path / "out").exists()


# -- run --live, with a real program --------------------------------------------------------------


def scrub(files: dict[str, bytes], folder: str) -> dict[str, bytes]:
    """The trace folder's path differs between the two reports (a temporary folder, then trace/)."""
    return {path: data.replace(folder.encode(), b"TRACE") for path, data in files.items()}


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_run_live_reports_the_first_compile_while_the_program_runs(tmp_path):
    gate = tmp_path / "gate"
    program = REPO / "tlparse_py" / "harness" / "scenarios" / "live_steps.py"
    opener = tmp_path / "opener"  # the "browser": notes each page it is asked to open
    opener.write_text(f"#!/bin/sh\necho \"$1\" >> {tmp_path / 'opened.txt'}\n")
    opener.chmod(0o755)
    run = tlparse("run", "--live", "-o", "out", "--", sys.executable, "-P", str(program), cwd=tmp_path,
                  env={**os.environ, "TLPARSE_HARNESS_GATE": str(gate), "BROWSER": str(opener)})
    out = tmp_path / "out"
    # the first compile may be seen under way too: wait for the second, which the gate holds open
    wait_for(lambda: "2 compiles so far, compiling" in live_index(out) or run.poll() is not None, timeout=300)
    index = live_index(out)
    assert run.poll() is None, stderr_of(tmp_path)  # the recompile waits on the gate: the program is alive
    banner = re.sub(r"<[^>]+>", "", index[index.index('id="live-banner"') :].split("</div>")[0])
    assert re.search(r"2 compiles so far, compiling \[0/1\] for \d+ s\.", banner) and "is running" in banner
    assert 'href="-_0_0_0/index.html"' in index and (out / "-_0_0_0" / "index.html").is_file()
    assert index.count("compiling…") == 1  # its row says so, rather than "metrics were missing"
    wait_for(lambda: (tmp_path / "opened.txt").exists())  # opened at the first compile, while the program runs
    gate.write_text("go")
    err = finished(run, tmp_path, timeout=300)
    assert run.returncode == 0, err
    assert (tmp_path / "opened.txt").read_text().splitlines() == [(out / "index.html").absolute().as_uri()]  # once
    logs = sorted((out / "trace").glob("dedicated_log*"))
    summary = read_json(out / "summary.json")
    assert summary["totals"]["compiles"] >= 3 and summary["totals"]["recompiles"] == 1 and summary["totals"]["graph_breaks"] == 1
    write_report(logs[0], tmp_path / "one_shot")
    final = {p: d for p, d in tree(out).items() if not p.startswith("trace/")}
    traced_in = str(Path(summary["inputs"][0]["path"]).parent)  # where the program wrote it, before it moved to trace/
    # the same report, but for the program exit only `run` knows
    assert summary["program"]["exit_code"] == 0 and read_json(tmp_path / "one_shot" / "summary.json")["program"] is None
    assert without_program_exit(scrub(final, traced_in)) == without_program_exit(scrub(tree(tmp_path / "one_shot"), str(out / "trace")))


# -- in a real browser, from file:// ----------------------------------------------------------------


def now_line(meta: dict, pid: int = 4242, ago_s: float = 0.0) -> str:
    """A record stamped with this machine's local time (as glog writes it), `ago_s` seconds ago."""
    when = time.time() - ago_s
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(when)) + f".{int(when % 1 * 1e6):06d}"
    return f"V{stamp} {pid} torch/_dynamo/x.py:7] {json.dumps(meta)}\n"


@pytest.mark.browser
def test_a_live_page_in_a_browser_follows_the_report_and_ends_as_the_final_one(tmp_path):
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    stack = {"stack": [{"line": 3, "name": "f", "filename": 0}]}
    log.write_text(now_line({"dynamo_start": stack, **cid(0)}, ago_s=5))
    live = LiveReport(log, tmp_path / "out", Options())
    live.update("running.", live.read())
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((tmp_path / "out" / "index.html").as_uri())
        banner = page.locator("#live-banner")
        assert "1 compile so far, compiling [0/0] for" in banner.inner_text()
        clock = page.locator("[data-since-epoch]")
        first = clock.inner_text()
        page.wait_for_function("t => document.querySelector('[data-since-epoch]').textContent !== t", arg=first, timeout=5000)
        assert re.fullmatch(r"\d+ s", clock.inner_text()) and int(clock.inner_text().split()[0]) >= 5  # the script counts on

        with open(log, "a") as handle:  # the compile ends, another starts and ends
            handle.write(now_line({"compilation_metrics": {"co_name": "f", "entire_frame_compile_time_s": 5.0}, **cid(0)}))
            handle.write(now_line({"dynamo_start": stack, **cid(1)}))
            handle.write(now_line({"compilation_metrics": {"co_name": "g", "entire_frame_compile_time_s": 0.1}, **cid(1)}))
        live.update("running.", live.read())
        written = time.monotonic()
        page.wait_for_function("() => /2 compiles so far\\./.test(document.getElementById('live-banner').textContent)", timeout=10_000)
        latency = time.monotonic() - written
        assert latency < 5  # polled every second
        assert "compiling" not in page.locator("#live-banner").inner_text()

        live.finish()
        live.close()
        page.wait_for_function("() => !document.getElementById('live-banner')", timeout=10_000)  # the final report
        assert page.locator('meta[name="tlparse-live"]').count() == 0
        assert "2" in page.locator("ul.cards li").nth(1).inner_text() and errors == []
        browser.close()


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
def test_the_readme_live_reports_commands_run_as_written(tmp_path):
    """The README's "Live reports" block, verbatim, from a folder where its program path resolves;
    the browser it opens is `true` (BROWSER), so nothing opens."""
    readme = (REPO / "README.md").read_text()
    block = re.search(r"## Live reports\n.*?```bash\n(.*?)```", readme, re.S).group(1)
    (tmp_path / "tlparse_py").symlink_to(REPO / "tlparse_py")
    env = {**os.environ, "BROWSER": "true", "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "-e", "-c", block], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    for out in ("tl_live", "tl_watch"):
        summary = read_json(tmp_path / out / "summary.json")
        assert summary["totals"]["compiles"] >= 3 and summary["totals"]["graph_breaks"] == 1, out
        assert not (tmp_path / out / "live.js").exists() and LIVE_MARK not in (tmp_path / out / "index.html").read_text()
    assert (tmp_path / "tl_live" / "trace").is_dir() and "the program has exited" in done.stderr


def test_a_folder_of_rank_logs_ends_as_the_multi_rank_report(tmp_path, writer):
    trace = tmp_path / "trace"
    trace.mkdir()
    rank0 = trace / "dedicated_log_torch_trace_rank_0_a.log"
    rank0.write_text(records_of(writer.pid, 0, 1).replace('"attempt": 0}', '"attempt": 0, "rank": 0}'))
    watch = tlparse("watch", str(trace), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    rank1 = trace / "dedicated_log_torch_trace_rank_1_b.log"  # the second rank starts logging later
    rank1.write_text(records_of(writer.pid, 0, 2).replace('"attempt": 0}', '"attempt": 0, "rank": 1}'))
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    done = subprocess.run([sys.executable, "-m", "tlparse_py", str(trace), "-o", "one_shot", "--no-browser"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert tree(tmp_path / "out") == tree(tmp_path / "one_shot")
    assert (tmp_path / "out" / "rank_1" / "index.html").is_file()


def test_a_second_log_of_the_process_that_appears_is_in_the_final_report(tmp_path, writer):
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "dedicated_log_torch_trace_a.log").write_text(records_of(writer.pid, 0, 1))
    watch = tlparse("watch", str(trace), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    time.sleep(0.05)  # a later modification time: the log of the same process that appears second
    (trace / "dedicated_log_torch_trace_b.log").write_text(records_of(writer.pid, 5, 1))
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    done = subprocess.run([sys.executable, "-m", "tlparse_py", str(trace), "-o", "one_shot", "--no-browser"], cwd=tmp_path,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert tree(tmp_path / "out") == tree(tmp_path / "one_shot")
    assert [c["id"] for c in read_json(tmp_path / "out" / "summary.json")["compiles"]] == ["[0/0]", "[5/0]"]


def test_a_log_removed_while_watched_is_waited_for_and_read_again_when_it_comes_back(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 2))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    wait_for(lambda: "2 compiles so far" in live_index(tmp_path / "out"))
    log.unlink()  # rotated away
    wait_for(lambda: "was removed; waiting for it to come back" in stderr_of(tmp_path))
    assert watch.poll() is None
    log.write_text(records_of(writer.pid, 4, 1))
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    assert [c["id"] for c in read_json(tmp_path / "out" / "summary.json")["compiles"]] == ["[4/0]"]


def test_sigterm_stops_the_watch_in_one_line(tmp_path, writer):
    log = tmp_path / "dedicated_log_torch_trace_x.log"
    log.write_text(records_of(writer.pid, 0, 1))
    watch = tlparse("watch", str(log), "-o", "out", "--no-browser", "--interval", "0.1", cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    watch.send_signal(signal.SIGTERM)
    err = finished(watch, tmp_path)
    assert watch.returncode == 143 and "Traceback" not in err
    assert err.strip().splitlines()[-1].startswith("Terminated (SIGTERM): stopped watching; out holds the last update")
    assert not list(tmp_path.glob(".out.lock"))  # the lock is the kernel's: gone with the process


def test_sigterm_to_run_live_stops_the_program_and_reports_what_it_traced(tmp_path):
    program = tmp_path / "prog.py"
    program.write_text(
        "import os, sys, time\n"
        f"log = open(os.path.join(os.environ['TORCH_TRACE'], 'dedicated_log_torch_trace_p.log'), 'w')\n"
        f"log.write({records_of(0, 0, 1)!r}.replace(' 0 torch', f' {{os.getpid()}} torch'))\n"
        "log.flush()\n"
        "time.sleep(120)\n")
    run = tlparse("run", "--live", "-o", "out", "--no-browser", "--", sys.executable, str(program), cwd=tmp_path)
    wait_for(lambda: "1 compile so far" in live_index(tmp_path / "out"))
    started = time.monotonic()
    run.send_signal(signal.SIGTERM)
    err = finished(run, tmp_path)
    assert run.returncode == 143 and time.monotonic() - started < 30, err
    assert "SIGTERM: " in err and "Traceback" not in err
    summary = read_json(tmp_path / "out" / "summary.json")  # the program was stopped: its report is final
    assert summary["totals"]["compiles"] == 1 and not (tmp_path / "out" / "live.js").exists()
