"""Memory that does not grow with the input (issue 34 items 16 and 17).

One compile id with very many records (a tensor description or an artifact logged in a loop) must
cost the same memory however many it holds; a diff must cost a bounded, small amount per compile.
Measured with tracemalloc (Python's own allocations: the same for the same input, whatever else the
machine does), with bounds several times what is measured; never with wall time or RSS.
"""

from __future__ import annotations

import gc
import importlib.util
import itertools
import json
import math
import pickle
import random
import tempfile
import threading
import time
import tracemalloc
from collections import Counter
from pathlib import Path

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tlparse_py.analysis.files import Files
from tlparse_py.analysis.spools import FactSpool
from tlparse_py.model import Artifact, CompileId, OutputRef, RecordSummary
from tlparse_py.options import Options
from tlparse_py.pipeline import write_report
from tlparse_py.report import outputs
from tlparse_py.report.outputs import RecordSpool
from tlparse_py.report.behind import BehindWrites

BENCHMARKS = Path(__file__).resolve().parent.parent / "benchmarks"
MB = 1 << 20


def bench(name: str):
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCHMARKS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def traced(work) -> tuple[int, int]:
    """(bytes still held once `work()` returned, with its result alive; the peak while it ran)."""
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        result = work()
        peak = tracemalloc.get_traced_memory()[1]
        gc.collect()  # what is held, not garbage that a collection not yet run would free (earlier tests leave cycles about)
        held = tracemalloc.get_traced_memory()[0]
        del result
    finally:
        tracemalloc.stop()
    return held - base, peak - base


# -- one compile id, very many records ---------------------------------------------------------------


def test_a_report_of_one_compile_id_costs_the_same_memory_at_22k_and_66k_records(tmp_path):
    """The whole report of a log of N describe_tensor records under [0/0]: before, the scratch files
    (record spool, raw.jsonl) stayed in memory up to 16 MB each and the spool kept 8 bytes a record,
    ~0.45 KB a record at the peak here (+20 MB from 22k to 66k); now it is flat."""
    write_log = bench("memory_one_id").write_log
    figures = {}
    for records in (22_000, 66_000):  # both logs past the reader's 4 MB chunk, as a big log reads
        log = write_log(tmp_path / f"dedicated_log_torch_trace_{records}.log", records)
        out = tmp_path / f"out_{records}"
        figures[records] = traced(lambda: write_report(log, out, options=Options(scanning_child=False)))
        assert f"describe_tensor</code> {records - 1000:,} more" in (out / "-_0_0_0" / "index.html").read_text()
    (held_small, peak_small), (held_big, peak_big) = figures[22_000], figures[66_000]
    assert peak_big - peak_small < 4 * MB, figures  # 44,000 records more: under 100 bytes each, at most
    assert held_big - held_small < 2 * MB, figures


def reference_records(entries: list[tuple[object, RecordSummary]], key: object, per_kind: int, generation_of) -> tuple[list, list]:
    """What RecordSpool.records returned when it kept every offset (before: 8 bytes a record)."""
    records, omitted, kept = [], Counter(), Counter()
    for k, summary in entries:
        if k != key:
            continue
        place = (generation_of(key, summary.line), (summary.kinds or ["(no kind)"])[0])
        if kept[place] >= per_kind:
            omitted[place] += 1
            continue
        kept[place] += 1
        records.append(summary.to_json())
    return records, list(omitted.items())


def test_the_record_spool_reads_back_what_it_did_when_it_kept_every_offset():
    rnd = random.Random(7)
    for trial in range(60):
        keys = [None, CompileId(None, 0, 0, 0), CompileId(None, 1, 0, 0), CompileId(None, 1, 1, 0)]
        entries = []
        for line in range(rnd.randint(0, 300)):
            kinds = rnd.choice([["describe_tensor"], ["guard_added_fast"], ["artifact"], [], ["a", "b"]])
            entries.append((rnd.choice(keys), RecordSummary(line, kinds, {k: {"i": line} for k in kinds}, {}, None, None,
                                                            [OutputRef(f"u{line}", False)] if line % 5 == 0 else [])))
        split = rnd.randint(0, 200)  # a compile id reused after reset(): a new generation from this line on

        def generation_of(key, line):
            return int(key is not None and line >= split)

        with tempfile.TemporaryFile() as handle:
            spool = RecordSpool(handle, generation_of)
            for key, summary in entries:
                spool.add(key, summary)
            for key in keys:
                for per_kind in (0, 1, 3, 1000):
                    got = spool.records(key, per_kind)
                    assert ([r.to_json() for r in got], list(got.omitted.items())) == reference_records(entries, key, per_kind, generation_of)


TEXTS = st.text(max_size=6) | st.text(st.sampled_from('a"\\é\x00\ud800\udc00'), max_size=6)  # lone surrogates too: msgspec cannot encode them


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.dictionaries(st.text(max_size=4), st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-(2**70), max_value=2**70) | st.floats(allow_nan=False) | TEXTS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3), max_leaves=8), max_size=4),
    TEXTS, st.booleans()), min_size=1, max_size=6))
def test_the_record_spool_gives_back_each_summary_as_json_would(items):
    """An entry is encoded from the summary and decoded into one (msgspec); where msgspec cannot (a
    lone surrogate), through `dumps` and `loads`. Either way the summary read back is the one a
    round trip through JSON with sorted keys gives: the same values, keys in sorted order, ints
    past 64 bits whole, an infinite float null (as orjson writes it). A summary holding both a lone
    surrogate and an infinite float, which no JSON holds, keeps each kind's value as its repr."""
    key = CompileId(None, 0, 0, 0)
    summaries = [RecordSummary(line, ["k"], {"k": meta}, {"rank": 0} if external else {}, url or None, len(url),
                               [OutputRef(url, external)]) for line, (meta, url, external) in enumerate(items)]
    expected = []
    for summary in summaries:
        if holds_surrogate(summary.to_json()) and finite(summary.meta) != summary.meta:  # no JSON holds both
            expected.append(json.loads(json.dumps({**summary.to_json(), "meta": {"k": repr(summary.meta["k"])[:2000]}})))  # the last resort: its repr
        else:
            expected.append(json.loads(json.dumps(finite(summary.to_json()), sort_keys=True)))  # (a surrogate pair comes back one character)
    with tempfile.TemporaryFile() as handle:
        spool = RecordSpool(handle)
        for summary in summaries:
            spool.add(key, summary)
        got = spool.records(key)
    assert [json.loads(json.dumps(back.to_json())) for back in got] == expected
    assert [list(back.meta["k"]) for back in got] == [sorted(e["meta"]["k"]) if isinstance(e["meta"]["k"], dict) else list(back.meta["k"])
                                                      for e, back in zip(expected, got)]  # keys in sorted order


def holds_surrogate(value) -> bool:
    return any(0xD800 <= ord(c) <= 0xDFFF for c in json.dumps(value, ensure_ascii=False))


def finite(value):
    """`value` with its infinite floats as None (what JSON without NaN or Infinity holds)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [finite(v) for v in value]
    return value


def test_the_record_spool_keeps_no_memory_per_record():
    summary = RecordSummary(1, ["describe_tensor"], {"describe_tensor": {"id": 1, "size": [4, 4]}}, {}, None, None, [])
    key = CompileId(None, 0, 0, 0)
    with tempfile.TemporaryFile() as handle:
        spool = RecordSpool(handle)
        for _ in range(2_000):
            spool.add(key, summary)
        held, _ = traced(lambda: [spool.add(key, summary) for _ in range(50_000)] and None)
        assert held < 64 * 1024  # before: an offset a record, 400 KB
        assert len(spool.records(key)) == 1000 and spool.records(key).omitted == Counter({(0, "describe_tensor"): 51_000})


def artifact(i: int) -> Artifact:
    return Artifact(url=f"-_0_0_0/thing_{i}.txt", name=f"thing_{i}.txt", number=i, suffix="✅" if i % 3 else "", raw=f"-_0_0_0/thing_{i}.txt")


def test_a_compile_ids_files_past_the_first_page_are_spooled_and_read_back_in_order(monkeypatch):
    monkeypatch.setattr(Files, "HEAD", 5)
    monkeypatch.setattr(Files, "BATCH", 3)
    spool = FactSpool()
    files = Files(spool)
    assert files == [] and not files and len(files) == 0
    expected = [artifact(i) for i in range(17)]
    for i, a in enumerate(expected, start=1):
        files.append(a)
        assert len(files) == i and list(files) == expected[:i] and files == expected[:i] and bool(files)
    assert files._head_len() == 5 and files.spilled() == 12  # the first HEAD in memory, the rest in the spool
    assert files[:5] == expected[:5] and files[:9] == expected[:9] and files[-1] == expected[-1] and files[6] == expected[6]
    assert files[2:] == expected[2:] and list(reversed(files)) == expected[::-1] and files.copy() == expected
    copied = pickle.loads(pickle.dumps(files))
    assert type(copied) is list and copied == expected  # a copied analysis holds a plain list


def test_a_shared_read_of_facts_is_read_again_once_a_fact_is_added():
    spool = FactSpool()
    spool.add(("span", 1), (0, "a", ("a",), 1.0))
    spool.add(("span", 2), (0, "b", ("b",), 2.0))
    first = spool.get_shared(("span", 1))
    assert first == spool.get(("span", 1)) == [(0, "a", ("a",), 1.0)]
    assert spool.get_shared(("span", 1)) is first  # read once for callers in a row
    assert spool.get_shared(("span", 2)) == [(0, "b", ("b",), 2.0)]
    spool.add(("span", 2), (1, "c", ("c",), 3.0))  # a live report reads on: what was read is stale
    assert spool.get_shared(("span", 2)) == [(0, "b", ("b",), 2.0), (1, "c", ("c",), 3.0)]
    spool.add(("span", 1), (1, "d", ("d",), 4.0))
    assert spool.get_shared(("span", 1)) == [(0, "a", ("a",), 1.0), (1, "d", ("d",), 4.0)]
    spool.close()


def test_files_keep_no_memory_per_file_past_the_first_page():
    spool = FactSpool()
    files = Files(spool, (artifact(i) for i in range(Files.HEAD + 2_000)))
    made = [artifact(i) for i in range(50_000)]  # made before: only what the list keeps is measured
    held, _ = traced(lambda: files.extend(made))
    del made
    assert held < 256 * 1024, held  # before: a list slot each, and every entry kept (~17 MB here)
    assert len(files) == Files.HEAD + 52_000
    assert [a.number for a in itertools.islice(files, Files.HEAD + 1_999, Files.HEAD + 2_002)] == [Files.HEAD + 1_999, 0, 1]


def old_directory_json(directory) -> bytes:
    data = {("unknown" if key is None else str(key)): {"artifacts": [a.to_json() for a in entries]} for key, entries in directory.items()}
    try:
        return orjson.dumps(data, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS)
    except (TypeError, orjson.JSONEncodeError):
        return json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False).encode("utf-8")


class Directory:
    def __init__(self, directory):
        self.directory = directory


@pytest.mark.parametrize("seed", range(4))
def test_compile_directory_json_written_in_pieces_is_the_same_bytes(monkeypatch, seed):
    rnd = random.Random(seed)
    for _ in range(60):
        monkeypatch.setattr(Files, "HEAD", rnd.choice([0, 1, 4, 5000]))
        monkeypatch.setattr(Files, "BATCH", rnd.choice([1, 2, 1000]))
        monkeypatch.setattr(outputs, "DIRECTORY_BATCH", rnd.choice([1, 2, 3, 1000]))
        spool = FactSpool()
        directory = {}
        for k in range(rnd.randint(0, 5)):
            key = rnd.choice([None, CompileId(None, k, 0, 0), CompileId(None, k % 2, 1, 0), CompileId(None, k, 0, 1)])
            entries = [Artifact(url=rnd.choice([f"a/b_{i}.txt", f'x\u00e9"\\\n\t<>/{i}', f"\U0001f642{i}"]), name=f"n{i}",
                                number=2**64 + i if seed == 3 and i == 7 else i,  # beyond 64 bits: the standard library writes it
                                suffix=rnd.choice(["", "✅"]), readable_url=rnd.choice([None, "r"]))
                       for i in (rnd.randint(0, 40) for _ in range(rnd.randint(0, 12)))]
            directory[key] = Files(spool, entries)
        expected = old_directory_json({key: list(entries) for key, entries in directory.items()})
        assert outputs.compile_directory_json(Directory(directory)) == expected


def test_files_waiting_to_be_written_are_bounded_in_number_not_only_in_bytes():
    """A million one-line payloads: before, 8 MB of them could wait (~700,000 queue entries, ~150 MB)."""
    longest = []
    gate = threading.Event()

    def write(rel: str, data: bytes) -> None:
        gate.wait()
        longest.append(len(behind.queue))

    behind = BehindWrites(write)
    putter = threading.Thread(target=lambda: [behind.put(f"payloads/{i}.txt", b"x") for i in range(40_000)])
    putter.start()
    deadline = time.monotonic() + 60
    while putter.is_alive() and len(behind.queue) < behind.MAX_BEHIND_BYTES // (behind.ENTRY_BYTES + 1) and time.monotonic() < deadline:
        time.sleep(0.01)
    waiting = len(behind.queue)
    gate.set()
    putter.join()
    behind.settle()
    assert waiting <= behind.MAX_BEHIND_BYTES // (behind.ENTRY_BYTES + 1) + 1
    assert max(longest) <= behind.MAX_BEHIND_BYTES // (behind.ENTRY_BYTES + 1) + 1 and len(longest) == 40_000


# -- a diff of many compiles --------------------------------------------------------------------------


def run_diff(tmp_path: Path, compiles: int) -> Path:
    from tlparse_py.analysis import comparison
    from tlparse_py.diff.load import load
    from tlparse_py.diff.output import write_diff

    memory_diff = bench("memory_diff")
    base = memory_diff.write_summary(tmp_path / f"base_{compiles}" / "summary.json", compiles)
    new = memory_diff.write_summary(tmp_path / f"new_{compiles}" / "summary.json", compiles, new=True)
    out = tmp_path / f"diff_{compiles}"

    def work() -> None:
        sides = [load(base, "BASE"), load(new, "NEW")]
        result = comparison.diff(sides[0].summary, sides[1].summary, str(base), str(new))
        del sides
        write_diff(result, out)

    return out, traced(work)


def test_a_diff_past_its_first_compiles_costs_a_few_hundred_bytes_a_compile(tmp_path):
    """Past the first 5,000 compiles of a side (held as objects) a diff's memory grows only with its
    frames: compiles and rows go to scratch files (issue 34 item 17). Before: ~2.1 KB a compile
    between these sizes (both summaries and every row held), ~3.1 KB at the peak of a whole run."""
    (_, (_, peak_small)), (out, (_, peak_big)) = run_diff(tmp_path, 6_000), run_diff(tmp_path, 16_000)
    per_compile = (peak_big - peak_small) / 10_000
    assert per_compile < 1_500, per_compile  # measured: ~950 (the page lists 2,400 frames, then its 5,000); 15 from 10k to 30k
    diff = json.loads((out / "diff.json").read_bytes())
    assert sum(len(f["pairs"]) for f in diff["comparison"]["frames"]) >= 16_000


def test_a_diff_read_in_batches_says_what_one_read_whole_says(tmp_path, monkeypatch):
    from tlparse_py.analysis import comparison
    from tlparse_py.analysis.summary_load import load_summary
    from tlparse_py.diff import load as loading
    from tlparse_py.diff.output import diff_json

    memory_diff = bench("memory_diff")
    monkeypatch.setattr(loading, "BATCH", 7)  # many batches
    base = memory_diff.write_summary(tmp_path / "base" / "summary.json", 300)
    new = memory_diff.write_summary(tmp_path / "new" / "summary.json", 320, new=True)
    data = json.loads(base.read_text())
    data["compiles"][3].pop("cache")  # an older summary.json: no cache results, compile times not compared
    base.write_text(json.dumps(data))
    whole = comparison.diff(load_summary(json.loads(base.read_bytes())), load_summary(json.loads(new.read_bytes())))
    batched = comparison.diff(loading.load(base).summary, loading.load(new).summary)
    assert diff_json(batched) == diff_json(whole)
    assert batched.comparison is not None and batched.comparison.time.why_not == comparison.NO_CACHE_RESULTS


@pytest.mark.parametrize("seed", range(3))
def test_diff_json_written_in_pieces_is_the_same_bytes(monkeypatch, seed):
    from tlparse_py.diff import output

    rnd = random.Random(seed)

    def value(depth: int):
        roll = rnd.random()
        if depth > 4 or roll < 0.3:
            return rnd.choice([None, True, 1, 2.5, -3, 'a\n"\u00e9\U0001f642', "", 10**18])
        if roll < 0.6:
            return {rnd.choice(["a", "b\n", 1, None, True]): value(depth + 1) for _ in range(rnd.randint(0, 4))}
        return [value(depth + 1) for _ in range(rnd.choice([0, 1, 3, 7, 12]))]

    for _ in range(500):
        monkeypatch.setattr(output, "BATCH", rnd.choice([1, 2, 3, 1000]))
        v = value(0)
        assert b"".join(output.diff_json_pieces(v)) == output.diff_json(v)


def test_the_diff_page_lists_the_first_frames_and_says_how_many_more(tmp_path, monkeypatch):
    from tlparse_py import limits

    monkeypatch.setattr(limits, "INDEX_ROWS", 10)
    out, _ = run_diff(tmp_path, 100)
    page = (out / "index.html").read_text()
    frames = len(json.loads((out / "diff.json").read_bytes())["comparison"]["frames"])
    assert f"{frames - 10:,} more frames: diff.json lists them all" in page


# -- scratch files written in batches and read by offset --------------------------------------------------


@pytest.mark.parametrize("in_memory", [1, 300, 1 << 20])
def test_the_record_spool_reads_back_what_was_added_between_its_batched_writes(monkeypatch, in_memory):
    """Entries are gathered before they are written, and read back by pread once on disk: reads
    between adds (a live report's) see every entry, in memory, rolled to disk midway, or on disk."""
    monkeypatch.setattr(RecordSpool, "WRITE_BYTES", 200)
    keys = [CompileId(None, f, 0, 0) for f in range(3)]
    added: dict = {key: [] for key in keys}
    with tempfile.SpooledTemporaryFile(max_size=in_memory) as handle:
        spool = RecordSpool(handle)
        for line in range(1, 400):
            key = keys[line % 3 if line % 7 else 0]
            summary = RecordSummary(line, ["guard"], {"guard": {"n": line, "text": "é" * (line % 13)}}, {}, None, None, [])
            spool.add(key, summary)
            added[key].append(line)
            if line % 50 == 0:
                assert [r.line for r in spool.records(key)] == added[key]
        assert handle._rolled == (in_memory < 10_000)
        for key in keys:
            assert [r.line for r in spool.records(key)] == added[key]


def test_raw_log_is_copied_by_the_kernel_or_read_and_written_alike(tmp_path, monkeypatch):
    import errno
    import os

    from tlparse_py.report import fileio

    source = tmp_path / "log"
    data = bytes(range(256)) * 5000
    source.write_bytes(data)

    def copy(room: int) -> tuple[int, bytes]:
        target = tmp_path / "copy"
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        try:
            with open(source, "rb") as handle:
                handle.peek(2)  # as open_log sniffs the gzip magic
                copied = fileio.copy_up_to(handle, fd, room, target)
        finally:
            os.close(fd)
        return copied, target.read_bytes()

    assert copy(10**9) == (len(data), data)
    assert copy(1000)[0] == 1001  # cut: room + 1
    calls = []

    def refused(*args):
        calls.append(args)
        raise OSError(errno.EXDEV, "cross-device")

    monkeypatch.setattr(os, "copy_file_range", refused)
    assert copy(10**9) == (len(data), data) and calls  # tried, refused, copied the usual way


@settings(max_examples=200, deadline=None)
@given(pieces=st.lists(st.binary(max_size=64), max_size=40), short=st.lists(st.integers(0, 300), max_size=8), iov=st.integers(1, 5))
def test_a_file_written_from_its_pieces_holds_them_joined(tmp_path_factory, pieces, short, iov):
    """A live page written from its pieces (never joined) holds what their join holds, however the
    system cuts the writes short (writev and write may write less than asked) and however few
    pieces one writev may take."""
    import os
    from unittest import mock

    from tlparse_py.report import fileio

    cuts = iter(short)
    writev, write = os.writev, os.write

    def short_writev(fd, batch):
        limit = next(cuts, None)
        if limit is None or not batch:
            return writev(fd, batch)
        return write(fd, b"".join(batch)[: max(1, limit)]) if any(batch) else writev(fd, batch)

    def short_write(fd, data):
        limit = next(cuts, None)
        return write(fd, bytes(data)[: max(1, limit)] if limit is not None else data)

    target = tmp_path_factory.mktemp("pieces") / "page.html"
    with mock.patch.object(os, "writev", short_writev), mock.patch.object(os, "write", short_write), \
            mock.patch.object(fileio, "IOV_MAX", iov):
        fileio.write_pieces_file(target, pieces)
    assert target.read_bytes() == b"".join(pieces)
