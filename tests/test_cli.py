"""The command line, in-process (click's CliRunner) and as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
from click.testing import CliRunner

from conftest import read_json
from logs import cid, line, metrics, start, write_log
from tlparse_py import __version__
from tlparse_py.cli import main


def good_log(path, frame=0, pid=None):
    lines = [start(frame, 0), line({"dynamo_output_graph": {}, **cid(frame, 0, 0)}, "g"), metrics(frame, 0, 0)]
    if pid is not None:  # another process than logs.line's default pid
        lines = [text.replace(" 4242 ", f" {pid} ", 1) for text in lines]
    return write_log(path, lines)


def run(*args, env=None):
    return CliRunner().invoke(main, [str(a) for a in args], env=env, catch_exceptions=False)


def test_writes_a_report(tmp_path):
    out = tmp_path / "out"
    result = run(good_log(tmp_path / "a.log"), "-o", out, "--no-browser")
    assert result.exit_code == 0, result.output
    assert (out / "index.html").is_file() and (out / "-_0_0_0/dynamo_output_graph_0.txt").is_file()
    assert "Stats { ok: 3 }" in result.stderr
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no staging leftovers


def test_default_output_folder_is_tl_out(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert run(good_log(tmp_path / "a.log"), "--no-browser").exit_code == 0
    assert (tmp_path / "tl_out" / "index.html").is_file()


def test_existing_output_needs_overwrite_and_keeps_old_report(tmp_path):
    out = tmp_path / "out"
    log = good_log(tmp_path / "a.log")
    assert run(log, "-o", out, "--no-browser").exit_code == 0
    before = (out / "index.html").read_text()
    result = run(log, "-o", out, "--no-browser")
    assert result.exit_code == 2 and "--overwrite" in result.stderr
    assert (out / "index.html").read_text() == before
    assert run(good_log(tmp_path / "b.log", frame=3), "-o", out, "--overwrite", "--no-browser").exit_code == 0
    assert (out / "-_3_0_0").is_dir() and not (out / "-_0_0_0").exists()


def test_overwrite_refuses_a_folder_that_is_not_a_report(tmp_path):
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "thesis.tex").write_text("years of work")
    result = run(good_log(tmp_path / "a.log"), "-o", precious, "--overwrite", "--no-browser")
    assert result.exit_code == 2 and "does not look like a tlparse report" in result.stderr
    assert (precious / "thesis.tex").read_text() == "years of work"


def test_overwrite_of_an_empty_folder_is_fine(tmp_path):
    out = tmp_path / "empty"
    out.mkdir()
    assert run(good_log(tmp_path / "a.log"), "-o", out, "--overwrite", "--no-browser").exit_code == 0


def test_a_failed_run_leaves_the_old_report(tmp_path, monkeypatch):
    out = tmp_path / "out"
    log = good_log(tmp_path / "a.log")
    run(log, "-o", out, "--no-browser")
    before = sorted(p.name for p in out.iterdir())

    def explode(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr("tlparse_py.pipeline.Pipeline.finish", explode)
    result = run(log, "-o", out, "--overwrite", "--no-browser")
    assert result.exit_code == 1 and "No space left on device" in result.stderr
    assert sorted(p.name for p in out.iterdir()) == before
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]


@pytest.mark.parametrize(
    "make_path, message",
    [
        (lambda t: t / "missing.log", "does not exist"),
        (lambda t: (t / "empty").mkdir() or t / "empty", "holds no trace logs"),
    ],
)
def test_bad_inputs_exit_2_with_one_line(tmp_path, make_path, message):
    out = tmp_path / "out"
    result = run(make_path(tmp_path), "-o", out, "--no-browser")
    assert result.exit_code == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not out.exists()


def test_unreadable_file_exits_2(tmp_path):
    if os.geteuid() == 0:
        pytest.skip("root can read anything")
    log = good_log(tmp_path / "a.log")
    log.chmod(0)
    result = run(log, "-o", tmp_path / "out", "--no-browser")
    assert result.exit_code == 2 and "cannot read" in result.stderr


def test_output_path_that_is_a_file_exits_2(tmp_path):
    target = tmp_path / "file.txt"
    target.write_text("x")
    result = run(good_log(tmp_path / "a.log"), "-o", target, "--no-browser", "--overwrite")
    assert result.exit_code == 2 and "not a folder" in result.stderr
    assert target.read_text() == "x"


def test_folder_with_one_log(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    good_log(folder / "dedicated_log_torch_trace_abc.log")
    out = tmp_path / "out"
    assert run(folder, "-o", out, "--no-browser").exit_code == 0
    assert (out / "-_0_0_0").is_dir()


def test_folder_with_several_runs_reads_the_newest_and_names_the_others(tmp_path):
    """Two processes (two pids): the newest run is read; logs of one process would be read together."""
    folder = tmp_path / "trace"
    folder.mkdir()
    old = good_log(folder / "dedicated_log_torch_trace_old.log", frame=1, pid=1001)
    new = good_log(folder / "dedicated_log_torch_trace_new.log", frame=2, pid=1002)
    os.utime(old, (time.time() - 100, time.time() - 100))
    out = tmp_path / "out"
    result = run(folder, "-o", out, "--no-browser")
    assert result.exit_code == 0
    assert "dedicated_log_torch_trace_new.log" in result.stderr and "dedicated_log_torch_trace_old.log" in result.stderr
    assert (out / "-_2_0_0").is_dir() and not (out / "-_1_0_0").exists()
    assert "dedicated_log_torch_trace_old.log" in (out / "index.html").read_text()
    assert new.name in (out / "index.html").read_text()


def test_latest_works_on_a_folder(tmp_path):
    """tlparse 0.4.3's --latest always fails; ours reads the newest log."""
    folder = tmp_path / "trace"
    folder.mkdir()
    old = good_log(folder / "dedicated_log_torch_trace_a.log", frame=1)
    good_log(folder / "dedicated_log_torch_trace_b.log", frame=2)
    os.utime(old, (time.time() - 100, time.time() - 100))
    out = tmp_path / "out"
    result = run(folder, "--latest", "-o", out, "--no-browser")
    assert result.exit_code == 0, result.stderr
    assert (out / "-_2_0_0").is_dir()


def test_latest_on_a_file_is_a_usage_error(tmp_path):
    result = run(good_log(tmp_path / "a.log"), "--latest", "-o", tmp_path / "o", "--no-browser")
    assert result.exit_code == 2 and "--latest" in result.stderr


def test_a_folder_of_rank_logs_gets_a_multi_rank_report(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        write_log(folder / f"dedicated_log_torch_trace_rank_{rank}_x.log", [line({"export": {}, "rank": rank})])
    out = tmp_path / "out"
    result = run(folder, "-o", out, "--no-browser")
    assert result.exit_code == 0 and "2 ranks (0, 1): writing a multi-rank report" in result.stderr
    assert (out / "rank_0" / "index.html").is_file() and (out / "rank_1" / "index.html").is_file()
    assert "Multi-rank report" in (out / "index.html").read_text()


def test_ranks_found_by_content_when_names_have_none(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    for rank in (0, 1):
        write_log(folder / f"dedicated_log_torch_trace_{rank}x.log", [line({"export": {}}), line({"export": {}, "rank": rank})])
    result = run(folder, "-o", tmp_path / "out", "--no-browser")
    assert result.exit_code == 0 and "ranks (0, 1)" in result.stderr
    assert (tmp_path / "out" / "rank_1" / "index.html").is_file()


def test_gzipped_log(tmp_path):
    log = write_log(tmp_path / "a.log.gz", [line({"dynamo_output_graph": {}, **cid()}, "g")], gz=True)
    out = tmp_path / "out"
    assert run(log, "-o", out, "--no-browser").exit_code == 0
    assert (out / "raw.log").read_bytes().startswith(b"V1202")  # raw.log is the log, not its gzip


def test_torch_trace_environment_variable_is_the_default_path(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    good_log(folder / "dedicated_log_torch_trace_x.log")
    out = tmp_path / "out"
    result = run("-o", out, "--no-browser", env={"TORCH_TRACE": str(folder)})
    assert result.exit_code == 0 and (out / "index.html").is_file()


def test_no_path_and_no_torch_trace_is_a_usage_error(tmp_path):
    result = run("-o", tmp_path / "out", env={"TORCH_TRACE": ""})
    assert result.exit_code == 2 and "missing PATH" in result.stderr


def test_strict_writes_the_report_then_exits_1(tmp_path):
    log = write_log(tmp_path / "a.log", ["not a trace line\n", line({"dynamo_output_graph": {}, **cid()}, "g")])
    out = tmp_path / "out"
    assert run(log, "-o", out, "--no-browser").exit_code == 0
    result = run(log, "-o", out, "--overwrite", "--no-browser", "--strict")
    assert result.exit_code == 1 and "fail_glog: 1" in result.stderr
    assert (out / "index.html").is_file()


def test_strict_passes_on_a_clean_log(tmp_path):
    assert run(good_log(tmp_path / "a.log"), "-o", tmp_path / "out", "--no-browser", "--strict").exit_code == 0


def test_strict_compile_id(tmp_path):
    log = write_log(tmp_path / "a.log", [line({"export": {}}), line({"export": {}, "frame_id": "bad"})])
    assert run(log, "-o", tmp_path / "o1", "--no-browser", "--strict-compile-id").exit_code == 1
    clean = write_log(tmp_path / "b.log", [line({"export": {}})])
    assert run(clean, "-o", tmp_path / "o2", "--no-browser", "--strict-compile-id").exit_code == 0


def test_verbose_names_each_bad_line(tmp_path):
    log = write_log(tmp_path / "a.log", [line({"export": {}}), "junk\n", line({"brand_new": {}})])
    result = run(log, "-o", tmp_path / "out", "--no-browser", "-v")
    assert "a.log:2: not a trace line" in result.stderr
    assert "brand_new (1)" in result.stderr
    quiet = run(log, "-o", tmp_path / "out2", "--no-browser")
    assert "a.log:2" not in quiet.stderr and "1 line(s) skipped" in quiet.stderr


def test_custom_header_html(tmp_path):
    out = tmp_path / "out"
    run(good_log(tmp_path / "a.log"), "-o", out, "--no-browser", "--custom-header-html", "<b>Job 42</b>")
    assert "<b>Job 42</b>" in (out / "index.html").read_text()


def test_browser_is_opened_unless_no_browser(tmp_path, monkeypatch):
    opened = []
    monkeypatch.setattr("webbrowser.open", lambda url: opened.append(url))
    run(good_log(tmp_path / "a.log"), "-o", tmp_path / "out")
    assert opened == [(tmp_path / "out" / "index.html").as_uri()]
    run(good_log(tmp_path / "b.log"), "-o", tmp_path / "out2", "--no-browser")
    assert len(opened) == 1


def test_version():
    result = run("--version")
    assert result.exit_code == 0 and result.output.strip() == f"tlparse-py {__version__}"


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_the_script_answers_version_as_click_does_without_importing_it(flag):
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from tlparse_py.entry import main; main(); print(sorted(m for m in sys.modules if m.startswith(('click', 'typing'))))", flag],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    printed, imported = proc.stdout.splitlines()
    assert printed == run(flag).output.strip() == f"tlparse-py {__version__}"
    assert imported == "[]"


def test_python_dash_m_in_a_subprocess(tmp_path):
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "tlparse_py", str(good_log(tmp_path / "a.log")), "-o", str(out), "--no-browser"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0, proc.stderr
    assert read_json(out / "compile_directory.json")["[0/0]"]["artifacts"][0]["name"] == "dynamo_output_graph_0.txt"
    bad = subprocess.run([sys.executable, "-m", "tlparse_py", str(tmp_path / "nope"), "--no-browser"], capture_output=True, text=True)
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and bad.stderr.startswith("Error: ")


@pytest.mark.parametrize("worker", [False, True])
def test_the_script_leaves_early_with_its_exit_code_its_output_and_the_exit_hooks(tmp_path, worker):
    """entry.leave_now skips the interpreter's teardown (os._exit): the exit code, every line
    printed and the atexit hooks must survive it; with a thread alive that Python waits for, Python
    exits as usual."""
    out = tmp_path / "out"
    probe = ("import atexit, os, sys, threading, time\n"
             "leave = os._exit\n"
             "os._exit = lambda code: (print('left early', code, flush=True), leave(code))\n"
             + ("threading.Thread(target=time.sleep, args=(0.5,)).start()\n" if worker else "")
             + "atexit.register(lambda: print('hook ran', flush=True))\n"
             "from tlparse_py.entry import main\nmain()\n")
    proc = subprocess.run([sys.executable, "-c", probe, str(good_log(tmp_path / "a.log")), "-o", str(out), "--no-browser",
                           "--fail-on", "compiles>0"], capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr
    printed = proc.stdout.splitlines()
    assert printed[-1] == ("hook ran" if worker else "left early 3") and "hook ran" in printed
    said = proc.stderr.splitlines()
    assert said[-1] == f"Error: --fail-on: 1 condition(s) held; the report is in {out}" and said[-3].startswith("Report: ")
    assert (out / "index.html").is_file()


def test_progress_bar_only_on_a_terminal(monkeypatch):
    import io

    from tlparse_py.cli import ProgressBar

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    bar = ProgressBar(total=200_000_000)
    bar(50_000_000, 1234)
    bar.clear()
    assert "[#######" in terminal.getvalue() and " 25% " in terminal.getvalue() and "1,234 records" in terminal.getvalue()
    piped = io.StringIO()
    monkeypatch.setattr("sys.stderr", piped)
    quiet = ProgressBar(total=10)
    quiet(5, 1)
    quiet.clear()
    assert piped.getvalue() == ""


def test_the_help_lists_every_command_with_its_own_summary_without_importing_them():
    import importlib
    import subprocess
    import sys

    from tlparse_py import cli

    for name, target in cli.COMMANDS.items():
        module, attribute = target.split(":")
        command = getattr(importlib.import_module(module), attribute)
        assert cli.SUMMARIES[name] == command.get_short_help_str(limit=200), name
    probe = ("import sys\nfrom tlparse_py.cli import main\ntry:\n    main(['--help'], prog_name='tlparse-py')\n"
             "except SystemExit:\n    pass\nprint('LOADED', sorted(m for m in ('jinja2', 'orjson', 'tlparse_py.commands.report') if m in sys.modules))")
    shown = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert "LOADED []" in shown
    for name, summary in cli.SUMMARIES.items():
        assert name in shown and summary[:40] in shown
