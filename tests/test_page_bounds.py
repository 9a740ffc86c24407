"""One compile id with very many records (issue 34 item 16): its page reads a bounded number of them
and says how many more raw.jsonl holds (the page builder's memory then stays bounded; the reading's
own per-record memory is not yet flat: see the issue's closing note)."""

from __future__ import annotations

import json
import re
from pathlib import Path

from logs import cid, line, write_log

from tlparse_py.limits import PAGE_FILES, PAGE_RECORDS_PER_KIND
from tlparse_py.pipeline import write_report


def tensor(i: int) -> str:
    return line({"describe_tensor": {"id": i, "ndim": 1, "size": [i], "dtype": "torch.float32", "describer_id": 0}, **cid(0, 0, 0)})


def artifact(i: int) -> str:
    return line({"artifact": {"name": "thing", "encoding": "string"}, **cid(0, 0, 0)}, f"payload {i}")


def big_log(path: Path, tensors: int, artifacts: int = 0) -> Path:
    start = line({"dynamo_start": {"stack": []}, **cid(0, 0, 0)})
    return write_log(path, [start, *(tensor(i) for i in range(tensors)), *(artifact(i) for i in range(artifacts))])


def test_a_compile_id_with_more_records_than_a_page_reads_says_so(tmp_path):
    tensors = PAGE_RECORDS_PER_KIND + 1500
    log = big_log(tmp_path / "dedicated_log_torch_trace_big.log", tensors, artifacts=PAGE_FILES + 100)
    out = tmp_path / "out"
    write_report(log, out)
    page = (out / "-_0_0_0" / "index.html").read_text()
    # every record is still counted and in raw.jsonl; the page lists and tabulates the first ones
    assert f"×{tensors}" in page and f"<code>describe_tensor</code> {1500:,} more" in page
    raw = [json.loads(text) for text in (out / "raw.jsonl").read_text().splitlines()[1:]]
    assert sum(1 for r in raw if "describe_tensor" in r) == tensors
    table = page[page.index('id="tensors"'):] if 'id="tensors"' in page else page
    assert len(re.findall(r"<td>tensor \d+</td>", table)) <= PAGE_RECORDS_PER_KIND
    # its files: all numbered and in compile_directory.json, the page and the index list the first ones
    directory = json.loads((out / "compile_directory.json").read_text())
    assert len(directory["[0/0]"]["artifacts"]) == PAGE_FILES + 100
    assert f"{100:,} more files" in page and f"{100:,} more files of this compile id" in (out / "index.html").read_text()
