"""Numbering parity with tlparse 0.4.3: the reference binary and tlparse-py, compile_directory.json side by side.

Every harness fixture log (each rank log on its own) is run through the `tlparse` binary and
through `write_report`; the two `compile_directory.json` files must be equal: the same compile-id
keys, and per key the same artifacts in the same order with the same name, number, url, suffix
and readable_url. The only differences allowed are tlparse's known bugs that tlparse-py fixes on
purpose (../shared/spec/tlparse-0.4.3.md §12), each normalised below by its own function.

Needs the `tlparse` binary (`pip install tlparse==0.4.3`): without it these tests skip, except in
CI (TLPARSE_PY_REQUIRE_ALL=1), where they fail. The synthetic tests of the kernel-stack-traces
rule run without it too.
"""

from __future__ import annotations

import gzip
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from logs import cid, line, write_log
from tlparse_py.report.outputs import NOT_JSON, strict_json
from tlparse_py.pipeline import write_report

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
LOGS = sorted([*TRACES.glob("*/*.log"), *TRACES.glob("*/*.log.gz")])
TLPARSE = shutil.which("tlparse")
REQUIRE_ALL = os.environ.get("TLPARSE_PY_REQUIRE_ALL") == "1"
STACK_TRACES = "inductor_provenance_tracking_kernel_stack_traces"
GLOG = re.compile(rb"^[VIWEC]\d{4} \d{2}:\d{2}:\d{2}\.\d{6} \d+[^:]+:\d+\] ")


@pytest.fixture
def tlparse():
    """The reference binary's path; skips without it (fails in CI)."""
    if TLPARSE is None:
        if REQUIRE_ALL:
            pytest.fail("TLPARSE_PY_REQUIRE_ALL=1 but the `tlparse` 0.4.3 binary is not on PATH (pip install tlparse==0.4.3)")
        pytest.skip("the reference `tlparse` 0.4.3 binary is not on PATH (pip install tlparse==0.4.3)")
    return TLPARSE


def run_tlparse(binary: str, log: Path, out: Path) -> dict[str, Any]:
    proc = subprocess.run([binary, str(log), "-o", str(out), "--overwrite", "--no-browser"], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads((out / "compile_directory.json").read_text(encoding="utf-8"))


def run_py(log: Path, out: Path) -> dict[str, Any]:
    write_report(log, out)
    return json.loads((out / "compile_directory.json").read_text(encoding="utf-8"))


def plain_log(log: Path, tmp_path: Path) -> Path:
    """tlparse 0.4.3 cannot read .gz (it panics): both tools get the same gunzipped copy."""
    if log.suffix != ".gz":
        return log
    plain = tmp_path / log.name[: -len(".gz")]
    plain.write_bytes(gzip.decompress(log.read_bytes()))
    return plain


# --------------------------------------------------------------------------------------------
# Known tlparse bugs that tlparse-py fixes on purpose, normalised one by one


def rank_rankless_records(log: Path, tmp_path: Path) -> Path:
    """Known bug (spec §12, "Once a rank is detected, records with no `rank` are dropped as `other_rank`").

    torch writes the `torch_version` artifact without a rank right after a rank log's first ranked
    record; tlparse drops it (and so lists no `torch_version_N.json` and numbers every later file
    one lower), tlparse-py keeps it. tlparse is given a copy of the log where such records carry
    the detected rank, so that it reads them as tlparse-py does; the comparison stays exact.
    """
    lines = log.read_bytes().split(b"\n")
    rank, changed = None, 0
    for i, text in enumerate(lines):
        match = GLOG.match(text)
        if match is None:
            continue
        try:
            envelope = json.loads(text[match.end():])
        except ValueError:
            continue
        if not isinstance(envelope, dict) or "str" in envelope:
            continue
        if rank is None:
            if isinstance(envelope.get("rank"), int):
                rank = envelope["rank"]
        elif "rank" not in envelope:
            body = text[match.end():].lstrip()
            fields = body[1:].lstrip()
            glue = b"" if fields.startswith(b"}") else b", "
            lines[i] = text[: match.end()] + b'{"rank": %d' % rank + glue + fields
            changed += 1
    if not changed:
        return log
    ranked = tmp_path / f"ranked_{log.name}"
    ranked.write_bytes(b"\n".join(lines))
    return ranked


def stack_traces_own_number(directory: dict[str, Any]) -> dict[str, Any]:
    """Known bug (spec §3.4 and §12, "The stack-traces JSON number is one higher than its filename suffix").

    tlparse spends the readable companion's number before it lists the JSON, so
    `…kernel_stack_traces_14.json` is listed as number 15; tlparse-py lists the file's own number
    (the companion still uses up 15 in both). Only entries that have a companion are touched.
    """
    for entries in directory.values():
        for artifact in entries["artifacts"]:
            name = artifact["name"]
            if name.startswith(STACK_TRACES) and name.endswith(".json") and artifact["readable_url"]:
                suffix = int(name[: -len(".json")].rpartition("_")[2])
                assert artifact["number"] == suffix + 1, artifact
                artifact["number"] = suffix
    return directory


NUMBERED = re.compile(r"_(\d+)(\.[^./]+)$")


def as_tlparse_043_names_vllm(directory: dict[str, Any]) -> dict[str, Any]:
    """Not a bug: vLLM's records are written as the newest upstream tlparse writes them
    (../shared/spec/tlparse-upstream.md rows 6-7), which 0.4.3 did not know: pattern dumps as `.py`
    (0.4.3: `.txt`), and a `vllm_post_grad.<i>.<Pass>.diff.html` page after each pass dump, which
    spends a number. Here ours are put back as 0.4.3 would number them: the pages left out, every
    later number one lower for each, the patterns as text; everything else stays exact."""
    dropped = sorted(a["number"] for entries in directory.values() for a in entries["artifacts"] if a["name"].endswith(".diff.html"))
    if not dropped:
        return directory

    def renumbered(text: str, number: int) -> str:
        return NUMBERED.sub(lambda m: f"_{number}{'.txt' if text.rpartition('/')[2].startswith('vllm_patterns.') else m.group(2)}", text)

    for entries in directory.values():
        kept = []
        for artifact in entries["artifacts"]:
            if artifact["name"].endswith(".diff.html"):
                continue
            number = artifact["number"] - sum(1 for n in dropped if n < artifact["number"])
            artifact.update(number=number, name=renumbered(artifact["name"], number), url=renumbered(artifact["url"], number))
            kept.append(artifact)
        entries["artifacts"] = kept
    return directory


def reference_directory(binary: str, log: Path, tmp_path: Path) -> dict[str, Any]:
    ranked = rank_rankless_records(log, tmp_path)
    return stack_traces_own_number(run_tlparse(binary, ranked, tmp_path / "tlparse"))


def first_difference(expected: dict[str, Any], actual: dict[str, Any]) -> str:
    if set(expected) != set(actual):
        return f"compile ids only in tlparse: {sorted(set(expected) - set(actual))}, only in tlparse-py: {sorted(set(actual) - set(expected))}"
    for key in expected:
        ours, theirs = actual[key]["artifacts"], expected[key]["artifacts"]
        for i, (a, e) in enumerate(zip(ours, theirs)):
            if a != e:
                return f"{key} artifact {i}: tlparse {e} / tlparse-py {a}"
        if len(ours) != len(theirs):
            return f"{key}: tlparse lists {len(theirs)} artifacts, tlparse-py {len(ours)}"
    return "equal"


# --------------------------------------------------------------------------------------------
# Every harness fixture


def test_every_fixture_scenario_is_compared():
    assert {p.parent.name for p in LOGS} == {p.name for p in TRACES.iterdir() if p.is_dir()}
    # keeps this module fast; 600 KB (was 500) for torchrun_ddp's rank 1, whose nine Inductor compiles
    # under DDP are ~1.5 MB of chromium events before gzip
    assert all(p.stat().st_size < 600_000 for p in LOGS)


@pytest.mark.parametrize("log", LOGS, ids=[str(p.relative_to(TRACES)) for p in LOGS])
def test_compile_directory_matches_tlparse(log, tlparse, tmp_path):
    plain = plain_log(log, tmp_path)
    expected = reference_directory(tlparse, plain, tmp_path)
    actual = as_tlparse_043_names_vllm(run_py(plain, tmp_path / "py"))
    assert actual == expected, first_difference(expected, actual)


def test_warm_cache_numbers_match_tlparse_after_payloadless_stack_traces(tmp_path):
    """Issue 11 item 7: on a cache hit the stack traces come with no payload, and use up no extra number."""
    directory = run_py(TRACES / "cache" / "dedicated_log_torch_trace_wykq40jt.log", tmp_path / "py")
    by_name = {a["name"]: a for a in directory["[0/0]"]["artifacts"]}
    assert by_name[f"{STACK_TRACES}_10.json"] == {
        "name": f"{STACK_TRACES}_10.json", "number": 10, "readable_url": "", "suffix": "", "url": f"-_0_0_0/{STACK_TRACES}_10.json",
    }
    assert by_name["fx_graph_cache_hit_11.json"]["number"] == 11
    assert "aotautograd_cache_hit_24.json" in by_name and "aotautograd_cache_hit_26.json" not in by_name


# --------------------------------------------------------------------------------------------
# The kernel-stack-traces companion: a page and a number only when the payload is JSON (as serde_json reads it)


def artifact(name: str, encoding: str, payload: str | None) -> str:
    return line({"artifact": {"name": name, "encoding": encoding}, **cid()}, payload)


def test_stack_traces_without_payload_use_no_number(tmp_path):
    log = write_log(tmp_path / "a.log", [artifact(STACK_TRACES, "json", None), artifact("fx_graph_cache_hit", "json", "{}")])
    out = tmp_path / "py"
    entries = run_py(log, out)["[0/0]"]["artifacts"]
    assert [(a["url"], a["number"], a["readable_url"]) for a in entries] == [
        (f"-_0_0_0/{STACK_TRACES}_0.json", 0, ""),
        ("-_0_0_0/fx_graph_cache_hit_1.json", 1, None),
    ]
    assert (out / f"-_0_0_0/{STACK_TRACES}_0.json").read_bytes() == b""  # written, empty, as tlparse writes it
    assert not list(out.glob("-_0_0_0/*_readable.html"))


def test_stack_traces_with_json_payload_use_a_number_for_their_page(tmp_path):
    log = write_log(tmp_path / "a.log", [artifact(STACK_TRACES, "json", "[]"), artifact("after", "string", "x")])
    out = tmp_path / "py"
    entries = run_py(log, out)["[0/0]"]["artifacts"]
    readable = f"-_0_0_0/{STACK_TRACES}_0_readable.html"
    assert [(a["url"], a["number"], a["readable_url"]) for a in entries] == [
        (f"-_0_0_0/{STACK_TRACES}_0.json", 0, readable),  # tlparse lists 1 here (known bug, see above)
        ("-_0_0_0/after_2.txt", 2, None),
    ]
    assert (out / readable).is_file()  # JSON that is no kernel map still gets its (empty) page, as in tlparse


# Payloads and whether tlparse 0.4.3 (serde_json) reads them as JSON, checked against the binary.
PAYLOADS = {
    "absent": (None, False),
    "empty": ("", False),
    "blank": ("   ", False),
    "not_json": ("not json", False),
    "trailing_text": ("{} x", False),
    "kernel_map": (json.dumps({"triton_poi_0": ["File \"m.py\", line 1\\n  foo()"]}), True),
    "empty_object": ("{}", True),
    "list": ("[]", True),
    "null": ("null", True),
    "scalar": ("1", True),
    "odd_values": (json.dumps({"k": "s", "j": [1, None, ["x"]]}), True),
    "nan": ('{"k": [NaN]}', False),
    "infinity": ("[-Infinity]", False),
    "float_overflow": ("[1.8e308]", False),
    "int_overflow": ("[1" + "0" * 400 + "]", False),
    "big_int": ("[1" + "0" * 300 + "]", True),
    "underflow": ("[1e-400]", True),
    "lone_surrogate": ('["\\ud800"]', False),
    "surrogate_pair": ('["\\ud83d\\ude00"]', True),
    "depth_127": ("[" * 127 + "]" * 127, True),
    "depth_128": ("[" * 128 + "]" * 128, False),
    "bom": ("\ufeff{}", False),
    "raw_tab_in_string": ('["a\tb"]', False),
}


@pytest.mark.parametrize("payload,is_json", PAYLOADS.values(), ids=PAYLOADS.keys())
def test_strict_json_reads_what_serde_json_reads(payload, is_json):
    assert (strict_json(payload or "") is not NOT_JSON) == is_json


@pytest.mark.parametrize("payload", [p for p, _ in PAYLOADS.values()], ids=PAYLOADS.keys())
def test_stack_traces_numbering_matches_tlparse(payload, tlparse, tmp_path):
    lines = [artifact(STACK_TRACES, "json", payload), artifact(f"{STACK_TRACES}_x", "json", payload), artifact("fx_graph_cache_hit", "json", "{}")]
    log = write_log(tmp_path / "a.log", lines)
    expected = reference_directory(tlparse, log, tmp_path)
    actual = run_py(log, tmp_path / "py")
    assert actual == expected, first_difference(expected, actual)
