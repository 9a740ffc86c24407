"""A folder of rank logs (torchrun's) is a first-class input: of `run` (which names where it keeps the
trace), of the Python API (a typed multi-rank analysis, the same report as the command line) and of
live reports (every rank followed, and a landing page that updates as they log)."""

from __future__ import annotations

import gzip
import html
import importlib.util
import json
import os
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import TRACES, read_json
from test_program_exit import without_program_exit
from test_live import LIVE_MARK, finished, live_index, records_of, tlparse, tree, wait_for, writer  # noqa: F401 (writer: a fixture)
import tlparse_py
from tlparse_py.analysis.compiles import Analysis
from tlparse_py.multirank.live import LiveRanks
from tlparse_py.multirank.ranks_analysis import RanksAnalysis
from tlparse_py.options import Options

HAS_TORCH = importlib.util.find_spec("torch") is not None


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "tlparse_py", *args], cwd=cwd, capture_output=True, text=True, timeout=600)


def without_trace(files: dict[str, bytes]) -> dict[str, bytes]:
    return {path: data for path, data in files.items() if not path.startswith("trace/")}


# -- run: everything the user sees names where the trace is kept -----------------------------------

# A stand-in for torchrun: writes two ranks' logs (the `collectives` fixture's, under its own pid, as
# each rank's process would) where TORCH_TRACE says, rank 1 a moment after rank 0, then exits.
RANKS_PROGRAM = """
import os, re, sys, time
trace = os.environ["TORCH_TRACE"]
for number, log in enumerate(sys.argv[1:]):
    time.sleep(1.5 * number)
    data = open(log, "rb").read()
    data = re.sub(rb"(?m)^([VIWEC]\\d{4} [0-9:.]+ )\\d+ ", lambda m: m.group(1) + b"%d " % os.getpid(), data)
    with open(os.path.join(trace, os.path.basename(log)), "wb") as f:
        f.write(data)
"""


def assert_names_only_the_kept_trace(out: Path, err: str) -> None:
    """No file of the report (but the trace itself) and no line on stderr names the temporary
    folder the program traced into; the inputs summary.json names are the kept logs."""
    assert f".{out.name}.trace-" not in err, err
    for path, data in without_trace(tree(out)).items():
        assert f".{out.name}.trace-".encode() not in data, path
    summary = read_json(out / "summary.json")
    kept = sorted((out / "trace").glob("dedicated_log*"))
    assert [i["path"] for i in summary["inputs"]] == [str(log.absolute()) for log in kept] and len(kept) == 2
    for entry in summary["ranks"]:
        rank = read_json(out / entry["folder"] / "summary.json")
        assert [i["path"] for i in rank["inputs"]] == [str((out / "trace").absolute() / Path(entry["summary"]["inputs"][0]["path"]).name)]


@pytest.mark.parametrize("live", [False, True], ids=["run", "run --live"])
def test_run_of_a_job_writing_rank_logs_names_where_it_keeps_the_trace(tmp_path, live):
    """Issue 44 item 2: the multi-rank report of `run` named `OUT/.OUT.trace-XXXX/`, a folder that is
    gone once the trace moves to `OUT/trace/`, and so did a line on stderr."""
    program = tmp_path / "ranks.py"
    program.write_text(RANKS_PROGRAM)
    logs = sorted(str(p) for p in (TRACES / "collectives").glob("dedicated_log*"))
    done = cli("run", *(["--live"] if live else []), "-o", "out", "--no-browser", "--", sys.executable, str(program), *logs, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    out = tmp_path / "out"
    assert_names_only_the_kept_trace(out, done.stderr)
    kept = (out / "trace").absolute()
    assert f"{kept} holds logs of 2 ranks (0, 1): writing a multi-rank report" in done.stderr
    # the report is the one `tlparse-py OUT/trace` writes, byte for byte, but for the program exit
    # only `run` knows (its landing's line, summary.md's line, summary.json's `program`)
    one_shot = cli(str(kept), "-o", str(tmp_path / "one_shot"), "--no-browser", cwd=tmp_path)
    assert one_shot.returncode == 0, one_shot.stderr
    assert read_json(out / "summary.json")["program"]["exit_code"] == 0 and read_json(tmp_path / "one_shot" / "summary.json")["program"] is None
    assert without_program_exit(without_trace(tree(out))) == without_program_exit(tree(tmp_path / "one_shot"))
    if live:
        assert "watching" in done.stderr and str(kept) in done.stderr and LIVE_MARK not in (out / "index.html").read_text()


TORCHRUN_PROGRAM = '''
import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()


def step(x):
    x = x + 1
    if rank == 1:
        print("rank 1 breaks the graph")
    return x * 2


torch.compile(step, backend="eager")(torch.ones(3))
dist.barrier()
dist.destroy_process_group()
'''


@pytest.mark.torch
@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed (pip install torch==2.13.0)")
@pytest.mark.parametrize("live", [False, True], ids=["run", "run --live"])
def test_run_of_a_real_torchrun_job(tmp_path, live):
    """`tlparse-py run -- torchrun --nproc-per-node 2 prog.py`: two ranks, rank 1 breaking the graph
    where rank 0 does not; the report names the kept trace and says the ranks diverge."""
    (tmp_path / "prog.py").write_text(TORCHRUN_PROGRAM)
    torchrun = Path(sys.executable).parent / "torchrun"
    done = cli("run", *(["--live"] if live else []), "-o", "out", "--no-browser", "--", str(torchrun), "--nproc-per-node", "2", "prog.py",
               cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    out = tmp_path / "out"
    assert_names_only_the_kept_trace(out, done.stderr)
    summary = read_json(out / "summary.json")
    assert [r["rank"] for r in summary["ranks"]] == [0, 1]
    assert [r["summary"]["totals"]["graph_breaks"] for r in summary["ranks"]] == [0, 1]
    assert "[0/0]" in {d["compile_id"] for d in summary["divergences"]}


# -- the Python API -----------------------------------------------------------------------------------

RANK_FOLDERS = ["distributed", "collectives_desync", "torchrun_ddp", "torchrun_rank_killed"]


@pytest.fixture(scope="module")
def cli_reports(tmp_path_factory):
    """The command line's multi-rank report of each rank folder."""
    root = tmp_path_factory.mktemp("cli")
    for name in RANK_FOLDERS:
        done = cli(str(TRACES / name), "-o", str(root / name), "--no-browser", cwd=root)
        assert done.returncode == 0, done.stderr
    return root


@pytest.mark.parametrize("name", RANK_FOLDERS)
def test_analyze_of_a_rank_folder_is_the_multi_rank_summary(cli_reports, name):
    """Issue 44 item 3: `analyze(folder)` raised `SeveralRanks: … writing a multi-rank report`,
    writing nothing. It gives each rank's analysis and what diverges, `to_dict()` the summary.json."""
    ranks = tlparse_py.analyze(TRACES / name)
    assert isinstance(ranks, RanksAnalysis)
    written = read_json(cli_reports / name / "summary.json")
    assert ranks.to_dict() == written
    assert ranks.ranks == [0, 1] and [r.rank for r in ranks.results] == [0, 1]
    for number in ranks.ranks:
        analysis = ranks.rank(number)
        assert isinstance(analysis, Analysis) and analysis.report_dir is None  # analyze writes nothing
        assert analysis.to_dict() == read_json(cli_reports / name / f"rank_{number}" / "summary.json")
    assert [[d.kind, d.compile_id, d.ranks, d.detail] for d in ranks.comparison.divergences] == \
        [[d["kind"], d["compile_id"], d["ranks"], d["detail"]] for d in written["divergences"]]
    assert ranks.diverges == bool(written["divergences"])
    assert ranks.summary().divergences == written["divergences"]
    with pytest.raises(KeyError, match=r"no log of rank 7 \(ranks: 0, 1\)"):
        ranks.rank(7)


@pytest.mark.parametrize("name", RANK_FOLDERS)
def test_build_of_a_rank_folder_writes_the_command_lines_report(cli_reports, tmp_path, name):
    out = tmp_path / "api"
    ranks = tlparse_py.build(TRACES / name, out)
    assert isinstance(ranks, RanksAnalysis) and ranks.report_dir == out
    assert tree(out) == tree(cli_reports / name)
    assert ranks.to_dict() == read_json(out / "summary.json")
    assert ranks.rank(1).report_dir == out / "rank_1" and ranks.rank(1).to_dict() == read_json(out / "rank_1" / "summary.json")


def cells(table: str) -> list[list[str]]:
    return [[re.sub(r"<[^>]+>", "", c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)] for row in re.findall(r"<tr>(.*?)</tr>", table, re.S)]


def test_a_notebook_shows_a_rank_folder_as_each_ranks_totals_and_what_diverges(tmp_path):
    """In a notebook the multi-rank analysis shows itself: each rank's totals (as its summary.json
    holds them) and every divergence; the ranks link to their reports once built."""
    ranks = tlparse_py.build(TRACES / "collectives_desync", tmp_path / "report")
    shown = ranks._repr_html_()
    written = read_json(tmp_path / "report" / "summary.json")
    first = written["divergences"][0]
    assert f"The ranks diverge, first at <code>{first['compile_id']}</code> on rank {first['ranks'][0]}" in shown
    for d in written["divergences"]:
        assert d["detail"] in html.unescape(shown)
    table = cells(shown[shown.index("<h4>Ranks</h4>") :])
    header, rows = table[0], table[1:]
    compiles, graph_breaks = header.index("compiles"), header.index("graph breaks")
    for entry in written["ranks"]:
        row = next(r for r in rows if r[0] == f"rank {entry['rank']}")
        totals = entry["summary"]["totals"]
        assert (row[compiles], row[graph_breaks]) == (str(totals["compiles"]), str(totals["graph_breaks"]))
        assert f'<a href="{os.path.relpath(tmp_path / "report")}/{entry["folder"]}/index.html" target="_blank">rank {entry["rank"]}</a>' in shown
    assert rows[-1][0] == "all"
    agree = tlparse_py.analyze(TRACES / "distributed")._repr_html_()
    assert "The ranks agree, as far as the logs tell" in agree and "open the report" not in agree  # nothing written


def test_show_of_a_rank_folder_shows_the_multi_rank_report(tmp_path):
    shown = tlparse_py.show(TRACES / "collectives_desync", tmp_path / "shown")
    page = shown._repr_html_()
    assert page.startswith("<iframe srcdoc=") and "Multi-rank report" in page and "Do the ranks agree?" in page
    assert (tmp_path / "shown" / "rank_1" / "index.html").is_file()


# -- live: every rank, and the landing --------------------------------------------------------------


def pages_agree_with_live_js(folder: Path) -> None:
    """Every page of the folder that live.js lists carries that version (what an open page polls)."""
    text = (folder / "live.js").read_text()
    state = json.loads(text[text.index("(") + 1 : text.rindex(")")])
    assert state["done"] is False and state["pages"]
    for page, version in state["pages"].items():
        assert f'data-page="{page}" data-version="{version}"' in (folder / page).read_text()[:4096], (folder, page)


def main_part(page: str) -> str:
    """The landing page's content, without the live banner and without the merged Chromium trace
    (each rank's chromium events are written with its final report)."""
    content = page[page.index("<h1>") : page.index("</main>")]
    return re.sub(r'<h2 id="chromium">.*?</div>\n', "", content, flags=re.S)


@pytest.mark.parametrize("name", ["collectives_desync", "torchrun_ddp"])
def test_a_live_rank_folder_shows_every_rank_and_a_landing_that_ends_as_the_final_one(tmp_path, name):
    """Issue 44 item 11: a live multi-rank view followed rank 0 only. Both ranks of a real two-rank
    trace grow piece by piece: after each update every rank's pages and the landing agree with their
    live.js, and once every byte is read the landing says what the one-shot report's says."""
    trace = tmp_path / "trace"
    trace.mkdir()
    data = {}
    for log in sorted((TRACES / name).glob("dedicated_log*")):
        data[trace / log.name.removesuffix(".gz")] = gzip.decompress(log.read_bytes())
    for log in data:
        log.write_bytes(b"")
    out = tmp_path / "live"
    live = LiveRanks(trace, out, Options())
    pieces, position = random.Random(3), dict.fromkeys(data, 0)
    banners = []
    while any(position[log] < len(d) for log, d in data.items()):
        for log, d in data.items():
            size = pieces.choice([100, 5000, 60_000])
            with open(log, "ab") as handle:
                handle.write(d[position[log] : position[log] + size])
            position[log] += size
        live.read()
        live.update("test")
        for folder in (out, out / "rank_0", out / "rank_1"):
            pages_agree_with_live_js(folder)
        index = (out / "index.html").read_text()
        banners.append(re.sub(r"<[^>]+>", "", index[index.index('id="live-banner"') :].split("</div>")[0]))
    live.close()
    assert all(" on 2 ranks" in b for b in banners) and any("compiling rank 1 [" in b for b in banners)
    done = cli(str(trace), "-o", str(tmp_path / "one_shot"), "--no-browser", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert main_part((out / "index.html").read_text()) == main_part((tmp_path / "one_shot" / "index.html").read_text())


def ranked(text: str, rank: int) -> str:
    return text.replace('"attempt": 0}', f'"attempt": 0, "rank": {rank}}}')


def test_watch_of_a_rank_folder_follows_every_rank_as_each_joins(tmp_path, writer):
    """One rank logs first (a live report of its log), then a second and a third: each joins the
    live report, which becomes the multi-rank one; the landing names the compile a rank is still on
    ("compiling…", not "metrics were missing"); the final report is the one-shot one."""
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "dedicated_log_torch_trace_rank_0_a.log").write_text(ranked(records_of(writer.pid, 0, 1), 0))
    watch = tlparse("watch", str(trace), "-o", "out", "--no-browser", "--interval", "0.1", "--quiet-s", "0.5", cwd=tmp_path)
    out = tmp_path / "out"
    wait_for(lambda: "1 compile so far." in live_index(out))
    rank1 = trace / "dedicated_log_torch_trace_rank_1_b.log"
    # rank 1 compiled [0/0], and is compiling [1/0]: started, no metrics yet
    rank1.write_text(ranked(records_of(writer.pid, 0, 1), 1) + records_of(writer.pid, 1, 1).split("\n")[0].replace('"attempt": 0}', '"attempt": 0, "rank": 1}') + "\n")
    wait_for(lambda: "3 compiles so far on 2 ranks" in live_index(out))
    landing = live_index(out)
    assert "compiling rank 1 [1/0]" in re.sub(r"<[^>]+>", "", landing) and 'href="rank_1/-_1_0_0/index.html"' in landing
    assert "1 compiling…" in landing and "Metrics were missing" not in landing
    assert "No: the ranks diverge" in landing  # rank 1 has [1/0], rank 0 not (yet)
    assert "2 compiles so far, compiling [1/0]" in re.sub(r"<[^>]+>", "", (out / "rank_1" / "index.html").read_text())
    (trace / "dedicated_log_torch_trace_rank_2_c.log").write_text(ranked(records_of(writer.pid, 0, 1), 2))  # a rank that starts late
    wait_for(lambda: "4 compiles so far on 3 ranks" in live_index(out))
    assert (out / "rank_2" / "index.html").is_file() and LIVE_MARK in (out / "rank_2" / "index.html").read_text()
    writer.kill()
    writer.wait()
    err = finished(watch, tmp_path)
    assert watch.returncode == 0, err
    assert "now holds the logs of several ranks: the live report follows every rank" in err
    assert f"watching {trace / 'dedicated_log_torch_trace_rank_2_c.log'} too (rank_2)" in err and "Traceback" not in err
    done = cli(str(trace), "-o", "one_shot", "--no-browser", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert tree(out) == tree(tmp_path / "one_shot")
    assert not (out / "live.js").exists() and not (out / "rank_1" / "live.js").exists()
    shutil.rmtree(out)


README = Path(__file__).resolve().parents[1] / "README.md"


def test_the_readme_python_api_block_runs_as_written(tmp_path, cli_reports):
    """The README's "Python API" block, verbatim, as a script (from a folder where its fixture paths resolve)."""
    block = re.search(r"## Python API\n.*?```python\n(.*?)```", README.read_text(), re.S).group(1)
    (tmp_path / "tests").symlink_to(README.parent / "tests")
    script = tmp_path / "api.py"
    script.write_text(block)
    done = subprocess.run([sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    written = read_json(cli_reports / "collectives_desync" / "summary.json")
    expected = ["[0, 1] True"] + [f"{d['kind']} {d['compile_id']} {d['ranks']}" for d in written["divergences"]]
    assert done.stdout.splitlines()[-len(expected) :] == expected
    single = read_json(tmp_path / "tl_out" / "summary.json")
    assert done.stdout.splitlines()[: len(single["compiles"])] == [
        f"{c['id']} {c['status']} {c['compile_time_s']['total']}" for c in single["compiles"]]
    same = cli("tests/fixtures/traces/collectives_desync", "-o", "tl_cli", "--no-browser", cwd=tmp_path)  # the same path, as written
    assert same.returncode == 0, same.stderr
    assert tree(tmp_path / "tl_ranks") == tree(tmp_path / "tl_cli")


@pytest.mark.browser
def test_a_live_landing_in_a_browser_follows_the_ranks_and_ends_as_the_final_report(tmp_path):
    """The landing page open in a browser reloads itself as the ranks log (from file://, as a rank's
    pages do), and once the final report is written over the live one it shows that."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is not installed (pip install -e '.[test]')")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    trace = tmp_path / "trace"
    trace.mkdir()
    rank0, rank1 = trace / "dedicated_log_torch_trace_rank_0_a.log", trace / "dedicated_log_torch_trace_rank_1_b.log"
    rank0.write_text(ranked(records_of(1, 0, 1), 0))
    rank1.write_text(ranked(records_of(1, 0, 1), 1))
    out = tmp_path / "out"
    live = LiveRanks(trace, out, Options())
    live.read()
    live.update("running.")
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox", "--disable-gpu"])
        page = browser.new_page()
        errors: list[str] = []
        page.on("pageerror", lambda error: errors.append(str(error)))
        page.goto((out / "index.html").as_uri())
        assert "2 compiles so far on 2 ranks" in page.locator("#live-banner").inner_text()
        assert "Yes, as far as the logs tell" in page.content()
        with open(rank1, "a") as handle:  # rank 1 goes on to a compile rank 0 never logs
            handle.write(ranked(records_of(1, 1, 1), 1))
        live.read()
        live.update("running.")
        page.wait_for_function("() => /3 compiles so far on 2 ranks/.test(document.getElementById('live-banner').textContent)", timeout=10_000)
        assert "No: the ranks diverge" in page.content()
        live.close()
        tlparse_py.build(trace, out, overwrite=True)  # the final report, as `watch` writes it over the live one
        page.wait_for_function("() => !document.getElementById('live-banner')", timeout=10_000)
        assert page.locator('meta[name="tlparse-live"]').count() == 0 and "No: the ranks diverge" in page.content()
        assert errors == []
        browser.close()
