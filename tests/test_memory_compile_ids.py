"""Memory per compile id (issue 46): a log of 100,000s of small compiles keeps a compact row per
compile id, not a tree of objects.

Measured with tracemalloc (Python's own allocations: the same for the same input, whatever else the
machine does), in bytes, with bounds well above what is measured; never with wall time or RSS.
`benchmarks/memory_compile_ids.py` measures the peak RSS of whole runs.
"""

from __future__ import annotations

import importlib.util
import pickle
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tlparse_py.analysis import compile_memo
from tlparse_py.analysis.compiles import summary_dict
from tlparse_py.analysis.files import Files
from tlparse_py.analysis.spools import FactSpool
from tlparse_py.analysis.metric_fields import METRIC_SUMMARY_FIELDS, MetricFields
from tlparse_py.model import Artifact
from tlparse_py.options import Options
from tlparse_py.pipeline import analyze_logs

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
FIXTURES = Path(__file__).resolve().parent / "fixtures" / "traces"


def tiny_compiles_log(path: Path, compiles: int) -> Path:
    """A log of `compiles` small whole compiles, one frame each (`make_logs.tiny_compile`)."""
    spec = importlib.util.spec_from_file_location("bench_make_logs", BENCHMARKS / "make_logs.py")
    assert spec is not None and spec.loader is not None
    make_logs = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(make_logs)
    path.write_bytes(b"".join(make_logs.tiny_compile(frame) for frame in range(compiles)))
    return path


HELD = """
import gc, sys, tracemalloc
from pathlib import Path
from tlparse_py.options import Options
from tlparse_py.pipeline import analyze_logs
gc.collect()
tracemalloc.start()
base = tracemalloc.get_traced_memory()[0]
analysis = analyze_logs([Path(sys.argv[1])], Options(scanning_child=False))
analysis.compiles()
gc.collect()
print(tracemalloc.get_traced_memory()[0] - base)
"""


def held_by_analysis(log: Path) -> int:
    """Bytes the analysis of `log` holds once read and its compiles built (what a forked page
    builder starts from), measured in a fresh interpreter: what earlier tests left in module-level
    caches (interned compile ids) must not count for or against it."""
    done = subprocess.run([sys.executable, "-c", HELD, str(log)], capture_output=True, text=True, check=True,
                          cwd=Path(__file__).resolve().parent.parent)
    return int(done.stdout.split()[-1])


def test_the_analysis_keeps_a_compact_row_per_compile_id(tmp_path):
    """Before: ~4.7 KB a compile id held (a metrics dict, directory entries as structs and strings,
    every CompileSummary in memory); now ~3.3 KB (of which the reading's own state, the pipeline's
    kind counters and the writer's folders, are outside the analysis). Both sizes are past SPOOLED_FROM."""
    assert compile_memo.SPOOLED_FROM < 2500
    small = held_by_analysis(tiny_compiles_log(tmp_path / "dedicated_log_torch_trace_small.log", 2500))
    big = held_by_analysis(tiny_compiles_log(tmp_path / "dedicated_log_torch_trace_big.log", 6000))
    per_id = (big - small) / 3500
    assert per_id < 3800, (small, big, per_id)


@pytest.mark.parametrize("scenario", ["recompile", "graph_break", "reset_reuse", "failure"])
def test_compiles_kept_packed_answer_as_compiles_kept_as_objects(monkeypatch, scenario):
    """`Analysis.compiles()` past SPOOLED_FROM keeps them in a scratch file: every answer is the same."""
    log = sorted((FIXTURES / scenario).glob("*.log*"))[0]
    objects = analyze_logs([log])
    monkeypatch.setattr(compile_memo, "SPOOLED_FROM", 0)
    packed = analyze_logs([log])
    assert packed.compiles() == objects.compiles()
    assert type(packed.memo.kept).__name__ == "SpooledCompiles"
    for compile_ in objects.compiles():
        for key in [compile_.key, *(k for k in packed.directory if k is not None and k.frame_key() == compile_.key)]:
            assert packed.compile_of(key, compile_.generation) == objects.compile_of(key, compile_.generation)
        assert packed.status_of(compile_.key) == objects.status_of(compile_.key)
    assert summary_dict(packed.summary()) == summary_dict(objects.summary())


def test_directory_entries_are_packed_and_read_back_as_they_were_listed():
    entries = [
        Artifact(url="-_0_0_0/dynamo_output_graph_3.txt", name="dynamo_output_graph_3.txt", number=3, kind="dynamo_output_graph",
                 raw="-_0_0_0/dynamo_output_graph_3.txt"),
        Artifact(url="https://example.com/x", name="a link", number=4, kind="link", is_link=True, subgraph="sub"),
        Artifact(url="-_0_0_0/fx_graph_cache_hit_5.json", name="other name", number=5, suffix="✅", readable_url="r.html",
                 raw="-_0_0_0/raw_5.txt"),
        Artifact(url="-_0_0_0/x_6.txt", name="x_6.txt", number=6, subgraph="\ud800 lone"),  # does not encode: kept as is
    ]
    files = Files(FactSpool(), entries)
    assert list(files) == entries
    assert [files[i] for i in range(-4, 4)] == entries + entries
    assert files[1:3] == entries[1:3]
    assert files == entries and entries[2] in files and files.index(entries[2]) == 2
    assert files + [entries[0]] == entries + [entries[0]]
    assert pickle.loads(pickle.dumps(files)) == entries
    assert sum(type(packed) is bytes for packed in list.__iter__(files)) == 3
    # what the url says is left out: the graph's name, raw file and kind are its url's (one copy of the words)
    assert next(list.__iter__(files)).count(b"dynamo_output_graph") == 1
    named = Artifact(url="-_0_0_0/x.y_12.txt", name="x.y_12.txt", number=12, kind="x.y")  # named after its kind, with a dot
    unnamed = Artifact(url="-_0_0_0/x_12.txt", name="x_12.txt", number=12, kind="")  # not named after its kind
    again = Files(FactSpool(), [named, unnamed])
    assert list(again) == [named, unnamed] and again._small.count(b"x.y") == 1


def test_a_small_compile_ids_files_are_one_bytes_object_until_they_are_many():
    """Up to Files.SMALL entries are one msgpack array in one bytes object (the list itself empty);
    the next moves them into the list, one packed entry each, and reads the same."""
    def entry(number: int) -> Artifact:
        return Artifact(url=f"-_0_0_0/dynamo_output_graph_{number}.txt", name=f"dynamo_output_graph_{number}.txt", number=number,
                        kind="dynamo_output_graph", raw=f"-_0_0_0/dynamo_output_graph_{number}.txt")

    entries = [entry(number) for number in range(Files.SMALL + 3)]
    files = Files(FactSpool())
    for count, item in enumerate(entries, start=1):
        files.append(item)
        in_one = count < Files.SMALL  # their folder is kept once, first, as one of the SMALL elements
        assert (list.__len__(files) == 0 and len(files._small) > 0) if in_one else (list.__len__(files) == count and files._small == b"")
        assert len(files) == count and list(files) == entries[:count] and files[count - 1] == entries[count - 1]
        assert files[-1] == entries[count - 1] and files[: count - 1] == entries[: count - 1] and files == entries[:count]
    assert pickle.loads(pickle.dumps(Files(FactSpool(), entries[:3]))) == entries[:3]
    # an entry that does not pack, among a few that do: the list holds them all from then on
    odd = Artifact(url="-_0_0_0/x_99.txt", name="x_99.txt", number=99, subgraph="\ud800 lone")
    mixed = Files(FactSpool(), [*entries[:2], odd, entries[2]])
    assert list(mixed) == [*entries[:2], odd, entries[2]] and mixed._small == b"" and list.__len__(mixed) == 4


_FOLDERS = st.sampled_from(["-_0_0_0/", "-_12_3_1/", "p1_-_0_0_0/", "", "a/b/", "é/"])
_KINDS = st.sampled_from(["dynamo_output_graph", "compilation_metrics", "x_1", "kind_", "", "a.b"])


@st.composite
def _entries(draw: Any) -> Artifact:
    """Directory entries as outputs number them (`<kind>_<number>.<ext>`), and odd ones: a name that is
    not the url's last part, a number the name does not end with, a suffix, a link, a subgraph, a raw
    file of its own, no extension, a leading zero."""
    folder, kind, number = draw(_FOLDERS), draw(_KINDS), draw(st.integers(-2, 10**6))
    ext = draw(st.sampled_from([".txt", ".html", ".json", "", ".tar.gz"]))
    name = draw(st.sampled_from([f"{kind}_{number}{ext}", f"{kind}_0{number}{ext}", f"other{ext}", f"{kind}_{number + 1}{ext}"]))
    url = folder + name
    if draw(st.booleans()):  # as outputs number most: only the raw file may be missing
        return Artifact(url=url, name=name, number=number, kind=kind, raw=draw(st.sampled_from([url, None])))
    return Artifact(url=url, name=draw(st.sampled_from([name, "shown name"])), number=number, suffix=draw(st.sampled_from(["", " (x)"])),
                    readable_url=draw(st.sampled_from([None, url + ".html"])), kind=draw(st.sampled_from([kind, "other"])),
                    is_link=draw(st.booleans()), raw=draw(st.sampled_from([url, None, "raw/elsewhere.txt"])),
                    subgraph=draw(st.sampled_from([None, "sub"])))


@given(st.lists(_entries(), max_size=20))
def test_a_compile_ids_files_read_back_as_they_were_listed_whatever_their_form(entries):
    """Each entry, kept short (its folder once, its name), packed whole, or in the list past SMALL,
    reads back equal to the one listed, in order, whole and one at a time."""
    files = Files(FactSpool(), entries)
    assert list(files) == entries and len(files) == len(entries)
    assert [files[at] for at in range(len(entries))] == entries and files[-1:] == entries[-1:]


def test_metric_fields_read_as_the_dict_of_the_summary_fields():
    meta = {"co_name": "f", "graph_op_count": 3, "restart_reasons": ["x"], "not_summarised": 1}
    fields = MetricFields(meta, restart_reasons=["in words"])
    expected = {name: meta.get(name) for name in METRIC_SUMMARY_FIELDS} | {"restart_reasons": ["in words"]}
    assert fields == expected and dict(fields) == expected
    assert fields["co_name"] == "f" and fields.get("not_summarised") is None and fields.get("nope", 7) == 7
    assert "co_name" in fields and "not_summarised" not in fields
    assert pickle.loads(pickle.dumps(fields)) == expected


def test_metric_fields_are_packed_and_read_back_as_logged():
    """A compile's fields cost a short bytes object (not a tuple of 21 values and their objects);
    values read back as they were logged, one compile's after another's, and those that do not
    pack (a lone surrogate, an integer past 64 bits) are kept as they are."""
    meta = {"co_name": "helper_23", "co_filename": "many_small_helpers.py", "co_firstlineno": 70, "graph_op_count": 6,
            "entire_frame_compile_time_s": 0.040912, "backend_compile_time_s": 0.000301, "restart_reasons": [],
            "recompile_reason": "0/0: tensor 'x' rank mismatch. expected 1, actual 2", "guard_count": 8, "cache_size": 0,
            "fail_type": None, "config_suppress_errors": False}
    fields = MetricFields(meta, restart_reasons=[])
    assert type(fields._packed) is bytes and sys.getsizeof(fields._packed) < 200
    other = MetricFields({**meta, "co_name": "other", "graph_op_count": 7, "fail_reason": "é ✅"})
    for _ in range(2):  # alternating between two compiles reads each one's own
        assert dict(fields) == {name: meta.get(name) for name in METRIC_SUMMARY_FIELDS}
        assert other["co_name"] == "other" and other["graph_op_count"] == 7 and other["fail_reason"] == "é ✅"
        assert fields["config_suppress_errors"] is False and fields["restart_reasons"] == [] and fields["fail_type"] is None
    odd = MetricFields({"co_name": "\ud800", "guard_count": 2**70})
    assert type(odd._packed) is tuple and odd["co_name"] == "\ud800" and odd["guard_count"] == 2**70


def test_the_records_of_one_compile_id_share_one_compile_id_object():
    """A log of 100,000s of records of a few compile ids keeps one object an id, not one a record."""
    from tlparse_py.model import CompileIds
    from tlparse_py.reading.records import compile_id_of

    ids = CompileIds()
    envelope = {"frame_id": 7, "frame_compile_id": 0, "attempt": 0}
    assert compile_id_of(dict(envelope), ids=ids) is compile_id_of(dict(envelope), ids=ids)
    assert compile_id_of(dict(envelope), process=2, ids=ids) is compile_id_of(dict(envelope), process=2, ids=ids)
    assert compile_id_of(dict(envelope), process=2, ids=ids) != compile_id_of(dict(envelope), ids=ids)
    assert len(ids) == 2
    assert compile_id_of(dict(envelope)) is not compile_id_of(dict(envelope))  # without a table: made each time


def test_every_table_of_a_report_holds_the_same_object_for_a_compile_id(tmp_path):
    """However many compile ids (past the 65,536 a table shared by the whole process once held),
    the tables keyed by compile id share one object an id, and a report's ids are its own."""
    log = tiny_compiles_log(tmp_path / "dedicated_log_torch_trace_tiny.log", 40)
    first = analyze_logs([log], Options(scanning_child=False))
    second = analyze_logs([log], Options(scanning_child=False))
    assert len(first.directory) == len(first.compile_ids) == 40
    kinds = {key: key for key in first.kinds}
    assert all(kinds[key] is key for key in first.directory)
    assert all(first.metrics[key][0].compile_id is key for key in first.directory)
    clock = {key: key for key in first.start_stacks}
    assert len(clock) == 40 and all(clock[key] is key for key in first.directory)
    assert not any(key is other for key, other in zip(first.directory, second.directory))


def test_replacing_a_report_removes_the_old_one_without_listing_its_folders(tmp_path):
    """--overwrite removes the report it replaces at the end of the run: a folder a compile id, each
    removed as its entry is read (a list of 40,000 entries cost 31 MB at the run's peak)."""
    import tracemalloc

    from tlparse_py.report.staging import remove_tree

    old = tmp_path / "old"
    for n in range(2000):
        (old / f"-_{n}_0_0").mkdir(parents=True)
        (old / f"-_{n}_0_0" / "index.html").write_bytes(b"x")
    tracemalloc.start()
    try:
        remove_tree(str(old))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert not old.exists()
    assert peak < 100_000, peak  # shutil.rmtree's list of the 2,000 entries: 1.5 MB


def test_removing_a_tree_removes_links_and_never_what_they_point_to(tmp_path):
    from tlparse_py.report.staging import remove_tree

    outside = tmp_path / "outside"
    (outside / "deep").mkdir(parents=True)
    (outside / "deep" / "kept.txt").write_text("kept")
    tree = tmp_path / "tree"
    (tree / "a" / "b").mkdir(parents=True)
    (tree / "a" / "b" / "f.txt").write_text("f")
    (tree / "to_folder").symlink_to(outside)
    (tree / "a" / "to_file").symlink_to(outside / "deep" / "kept.txt")
    remove_tree(str(tree))
    assert not tree.exists() and (outside / "deep" / "kept.txt").read_text() == "kept"
    remove_tree(str(tmp_path / "missing"))  # nothing there: nothing to do, no error


@given(st.lists(st.tuples(st.sampled_from(["add", "in"]), st.sampled_from([None, 0]), st.one_of(st.integers(0, 40), st.sampled_from([4095, 4096, 10**6, 2**32 - 1])),
                          st.sampled_from([None, 0, 1, 7, 8, 300]), st.sampled_from([None, 0, 1])), max_size=60))
def test_a_process_frame_compiles_answer_as_a_set_does(operations):
    """`Generations.current`: bits for most frame compiles, a set for the rest; the same answers as a set."""
    from tlparse_py.analysis.store import FrameCompiles
    from tlparse_py.model import CompileId

    kept, expected = FrameCompiles(), set()
    for operation, autograd, frame, compile_, attempt in operations:
        key = CompileId(autograd, frame, compile_, attempt)
        if operation == "add":
            kept.add(key)
            expected.add(key)
        assert (key in kept) == (key in expected)
    assert all(key in kept for key in expected) and "[0/0]" not in kept
    assert len(kept._bits) <= 8 * len(expected) + 4096


def test_frame_compiles_keep_a_bit_a_compile_not_a_set_entry():
    from tlparse_py.analysis.store import FrameCompiles
    from tlparse_py.model import CompileId

    kept = FrameCompiles()
    for frame in range(20_000):
        kept.add(CompileId(None, frame, 0, 0))
    assert len(kept._bits) == 20_000 and not kept._others
    assert CompileId(None, 19_999, 0, 0) in kept and CompileId(None, 19_999, 1, 0) not in kept and CompileId(None, 20_000, 0, 0) not in kept
