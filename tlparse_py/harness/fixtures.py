"""Turn harness logs into committed test fixtures.

Two jobs:

* `normalise_log` rewrites machine-specific path prefixes (site-packages, the venv, the
  stdlib, the home dir, temp dirs, the trace dir, the working directory) to stable
  placeholders, in header lines and payload lines alike, and recomputes `has_payload` for
  every record whose payload changed, so the fixture still passes md5 checks.
* `write_fixtures` copies a run's normalised logs to `<fixtures>/<scenario>/`, gzips the big
  ones and keeps `<fixtures>/README.md` (provenance table + regenerate command) up to date.

The log format (see the torch 2.13 records spec, section 1): a header line
`V1202 12:14:23.064000 5351 torch/_dynamo/utils.py:2350] {json}` followed by zero or more
payload lines, each starting with one TAB. `has_payload` is the md5 of the payload lines
with that TAB stripped, joined by "\\n", as UTF-8. Everything here works on bytes, so no
byte of a log is lost or re-encoded.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import os
import re
import sys
import sysconfig
import tempfile
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from msgspec import Struct

from .registry import BY_NAME, SCENARIO_DIR
from .runner import ScenarioResult

GZIP_OVER_BYTES = 400 * 1024
# 11 MiB (was 10): the issue-33 round-4 scenarios (aot_inductor ~27 KB gzipped, export_qualified_dim ~55 KB,
# processes ~100 KB) do not fit the ~12 KB the first 10 MiB had left; each is as small as its records allow.
# 13 MiB (was 11): issue 44's torchrun jobs (DDP, FSDP2, a rank that breaks, recompiles, fails or is killed)
# are two logs each, and a rank's log holds its whole DDP/FSDP wrapping; 11 MiB had ~130 KB left.
FIXTURES_BUDGET_BYTES = 13 * 1024 * 1024
REGENERATE = "python -m tlparse_py.harness --fixtures {dir}"
TABLE_START = "<!-- harness-fixtures:start -->"
TABLE_END = "<!-- harness-fixtures:end -->"
TABLE_COLUMNS = ("scenario", "file", "torch", "device", "date (UTC)", "bytes", "notes")

_HAS_PAYLOAD = re.compile(rb'"has_payload": "([0-9a-f]{32})"')
_TORCH_VERSION = re.compile(rb'"pytorch_version": "([^"]+)"')
_RANK_IN_NAME = re.compile(r"_rank_(\d+)_")
# Prefixes too generic to replace: they would also hit /usr/bin/g++ and friends.
_TOO_GENERIC = {"/", "/usr", "/usr/local", "/opt", "/home"}


# --------------------------------------------------------------------------- normalising


def standard_replacements(
    *,
    trace_dir: str | os.PathLike | None = None,
    temp_root: str | os.PathLike | None = None,
    cwd: str | os.PathLike | None = None,
) -> list[tuple[str, str]]:
    """(machine path, placeholder) pairs for logs made by this interpreter.

    The scenario subprocesses run `sys.executable`, so its sysconfig paths are theirs.
    Order does not matter: `normalise_log` always prefers the longest matching prefix.
    """
    paths = sysconfig.get_paths()
    pairs = [
        (paths["purelib"], "/site-packages"),
        (paths["platlib"], "/site-packages"),
        # Not sysconfig's "platstdlib": inside a venv that names the venv's lib dir.
        (paths["stdlib"], "/stdlib"),
        (os.path.dirname(os.__file__), "/stdlib"),
        (sys.prefix, "/venv"),
        (sys.base_prefix, "/python"),
        (str(SCENARIO_DIR), "/work/scenarios"),
        (trace_dir, "/tmp/trace"),
        (temp_root, "/tmp/harness"),
        (tempfile.gettempdir(), "/tmp"),
        (os.path.expanduser("~"), "/home/user"),
        (cwd if cwd is not None else os.getcwd(), "/work"),
    ]
    full = _with_real_paths(pairs)
    return full + _shortened_forms(full, _torch_dir())


def _torch_dir() -> str | None:
    """Where torch is installed, found without importing it (find_spec does not)."""
    spec = importlib.util.find_spec("torch")
    locations = spec.submodule_search_locations if spec else None
    return os.path.normpath(locations[0]) if locations else None


def _shortened_forms(pairs: list[tuple[str, str]], torch_dir: str | None) -> list[tuple[str, str]]:
    """The forms torch's `shorten_filename` gives these paths, mapped to bare placeholders.

    Guard comments print source locations through torch.utils._traceback.shorten_filename,
    which cuts off the path shared with torch's own directory (plus one more character):
    `/root/.pyenv/.../contextlib.py` becomes `oot/.pyenv/.../contextlib.py` and a scenario
    becomes `tlparse_py/harness/scenarios/x.py`. Those leftovers are machine-specific too.
    Short leftovers (under 8 characters) are skipped: too likely to match ordinary text.
    """
    if not torch_dir:
        return []
    out = []
    for path, placeholder in pairs:
        try:
            common = os.path.commonpath([path, torch_dir])
        except ValueError:
            continue
        short = path[len(common) + 1 :]
        if len(short) >= 8 and short != path:
            out.append((short, placeholder.lstrip("/")))
    return out


def _with_real_paths(pairs: Iterable[tuple[object, str]]) -> list[tuple[str, str]]:
    """Drop empty/generic prefixes and add the symlink-resolved form of each path."""
    out: dict[str, str] = {}
    for path, placeholder in pairs:
        if not path:
            continue
        for form in (os.path.normpath(str(path)), os.path.realpath(str(path))):
            if form not in _TOO_GENERIC and len(form) > 1:
                out.setdefault(form, placeholder)
    return list(out.items())


def _prefix_pattern(replacements: Sequence[tuple[str, str]]) -> re.Pattern[bytes]:
    """One regex for all prefixes, longest first, matching whole path components only.

    The lookbehind keeps `/a/tmp` from matching `/tmp`; the lookahead keeps `/tmp` from
    matching the start of `/tmpfoo`. A single pass means a placeholder is never
    rewritten again by a shorter prefix.
    """
    prefixes = sorted({p.encode() for p, _ in replacements}, key=len, reverse=True)
    alternation = b"|".join(re.escape(p) for p in prefixes)
    return re.compile(rb"(?<![\w./-])(?:" + alternation + rb")(?![\w.-])")


def payload_md5(payload_lines: Sequence[bytes]) -> str:
    """md5 of a record's payload: lines without their leading TAB, joined by newlines."""
    return hashlib.md5(b"\n".join(line[1:] for line in payload_lines)).hexdigest()


def _split_records(lines: list[bytes]) -> Iterable[tuple[bytes | None, list[bytes]]]:
    """Group lines into (header, payload lines); stray TAB lines get a None header."""
    header: bytes | None = None
    payload: list[bytes] = []
    for line in lines:
        if line.startswith(b"\t"):
            payload.append(line)
            continue
        if header is not None or payload:
            yield header, payload
        header, payload = line, []
    if header is not None or payload:
        yield header, payload


def normalise_log(data: bytes, replacements: Sequence[tuple[str, str]]) -> bytes:
    """Replace path prefixes in every line and fix `has_payload` where a payload changed.

    Lines are split on b"\\n" only: a payload line may contain a bare "\\r", and torch
    itself splits payloads on "\\n" alone.
    """
    if not replacements:
        return data
    pattern = _prefix_pattern(replacements)
    mapping = {p.encode(): ph.encode() for p, ph in replacements}

    def sub(line: bytes) -> bytes:
        return pattern.sub(lambda m: mapping[m.group(0)], line)

    out: list[bytes] = []
    for header, payload in _split_records(data.split(b"\n")):
        new_payload = [sub(line) for line in payload]
        if header is not None:
            new_header = sub(header)
            if new_payload != payload:
                digest = payload_md5(new_payload).encode()
                new_header = _HAS_PAYLOAD.sub(b'"has_payload": "' + digest + b'"', new_header)
            out.append(new_header)
        out.extend(new_payload)
    return b"\n".join(out)


# --------------------------------------------------------------------------- fixtures


class FixtureRow(Struct, frozen=True):
    """One row of the README table: where a fixture file came from."""

    scenario: str
    file: str
    torch: str
    device: str
    date: str
    bytes: int
    notes: str

    def to_markdown(self) -> str:
        """The row as a Markdown table line."""
        cells = (self.scenario, f"`{self.file}`", self.torch, self.device, self.date,
                 f"{self.bytes:,}", self.notes)
        return "| " + " | ".join(cells) + " |"

    @classmethod
    def from_markdown(cls, line: str) -> FixtureRow | None:
        """Parse a line written by `to_markdown`; None if it is not one."""
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != len(TABLE_COLUMNS) or not cells[5].replace(",", "").isdigit():
            return None
        return cls(cells[0], cells[1].strip("`"), cells[2], cells[3], cells[4],
                   int(cells[5].replace(",", "")), cells[6])


def torch_version_of(datas: Iterable[bytes]) -> str:
    """The torch version from a `torch_version` artifact in any of the logs."""
    for data in datas:
        m = _TORCH_VERSION.search(data)
        if m:
            return m.group(1).decode("ascii", errors="replace")
    return "unknown"


def describe_log(result: ScenarioResult, path: Path, data: bytes) -> str:
    """A short note telling apart the files of one scenario."""
    notes = []
    labels = result.scenario.process_labels
    if result.scenario.processes > 1:
        number = result.log_process.get(path, 0)
        label = labels[number - 1] if 0 < number <= len(labels) else ""
        notes.append(f"process {number} of {result.scenario.processes}" + (f": {label}" if label else ""))
    rank = _RANK_IN_NAME.search(path.name)
    if rank:
        notes.append(f"rank {rank.group(1)}")
    if b"torch_version" not in data and b'{"exported_program": ' in data:
        notes.append("draft_export capture file")
    return "; ".join(notes)


def _clear_fixture_dir(dest: Path) -> None:
    """Remove a scenario's old fixture files (their names are random, so they pile up)."""
    for pattern in ("*.log", "*.log.gz"):
        for old in dest.glob(pattern):
            old.unlink()


def _write_fixture(dest: Path, name: str, data: bytes, gzipped: bool = False) -> Path:
    """Write one fixture, gzipped (deterministically: mtime 0) when it is big or its scenario asks."""
    if gzipped or len(data) > GZIP_OVER_BYTES:
        path = dest / (name + ".gz")
        path.write_bytes(gzip.compress(data, compresslevel=9, mtime=0))
    else:
        path = dest / name
        path.write_bytes(data)
    return path


def write_scenario_fixtures(result: ScenarioResult, fixtures_dir: Path, date: str) -> list[FixtureRow]:
    """Normalise one scenario's logs into `fixtures_dir/<scenario>/`; return README rows."""
    dest = fixtures_dir / result.scenario.name
    dest.mkdir(parents=True, exist_ok=True)
    _clear_fixture_dir(dest)
    replacements = standard_replacements(trace_dir=result.trace_dir, temp_root=result.temp_root)
    raw = {path: path.read_bytes() for path in result.logs}
    version = torch_version_of(raw.values())
    rows = []
    for path, data in raw.items():
        normalised = normalise_log(data, replacements)
        written = _write_fixture(dest, path.name, normalised, result.scenario.gzip_fixture)
        rows.append(FixtureRow(result.scenario.name, written.name, version, result.device, date,
                               written.stat().st_size, describe_log(result, path, data)))
    return rows


def read_table(readme: Path) -> list[FixtureRow]:
    """Rows of the provenance table in an existing README (empty if none)."""
    if not readme.exists():
        return []
    text = readme.read_text(encoding="utf-8")
    if TABLE_START not in text or TABLE_END not in text:
        return []
    block = text.split(TABLE_START, 1)[1].split(TABLE_END, 1)[0]
    return [row for line in block.splitlines() if (row := FixtureRow.from_markdown(line))]


def merge_rows(old: list[FixtureRow], new: list[FixtureRow], fixtures_dir: Path) -> list[FixtureRow]:
    """New rows replace a regenerated scenario's old ones; others stay if their file does."""
    regenerated = {row.scenario for row in new}
    kept = [r for r in old if r.scenario not in regenerated
            and (fixtures_dir / r.scenario / r.file).exists()]
    order = {name: i for i, name in enumerate(BY_NAME)}
    return sorted(kept + new, key=lambda r: (order.get(r.scenario, len(order)), r.notes, r.file))


def render_readme(rows: list[FixtureRow], fixtures_dir: Path) -> str:
    """The whole README: what the fixtures are, how to regenerate them, the table."""
    header = "| " + " | ".join(TABLE_COLUMNS) + " |\n|" + "---|" * len(TABLE_COLUMNS)
    total = sum(r.bytes for r in rows)
    return f"""# Trace fixtures made by the compile harness

Real TORCH_TRACE / TORCH_DTRACE logs, one directory per harness scenario
(`tlparse_py/harness/scenarios/<scenario>.py`). Do not edit them by hand; regenerate them all
with (needs torch: `pip install -e '.[harness]'`):

    {REGENERATE.format(dir=display_path(fixtures_dir))}

Name scenarios after the directory to regenerate only those; the rows of the others stay.
File names are the ones torch chose (`dedicated_log_torch_trace_[rank_N_]<random>.log`); files over
{GZIP_OVER_BYTES // 1024} KB, and those of scenarios that ask (`gzip_fixture`), are gzipped (`.log.gz`).

Machine-specific paths were replaced by placeholders, in header and payload lines, and every
changed record's `has_payload` md5 was recomputed:

| placeholder | was |
|---|---|
| `/site-packages` | the interpreter's site-packages |
| `/venv` | `sys.prefix` |
| `/stdlib`, `/python` | the standard library, `sys.base_prefix` |
| `/work/scenarios` | the harness's scenario programs |
| `/tmp/trace` | the directory the trace was written to |
| `/tmp/harness` | the scenario's private temp root (Inductor cache, TMPDIR, cwd) |
| `/tmp` | the temp dir |
| `/home/user` | the home directory |
| `/work` | the working directory the harness ran from |

Where torch prints a path shortened (the source locations in guard comments), the same
placeholder appears without its leading slash (`stdlib/contextlib.py`). Timestamps and
process ids are left as they were.

{TABLE_START}
{header}
{chr(10).join(r.to_markdown() for r in rows)}
{TABLE_END}

Total: {len(rows)} files, {total:,} bytes.
"""


def display_path(path: Path) -> str:
    """`path` relative to the working directory when it is inside it."""
    try:
        return str(path.resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def utc_now() -> str:
    """Today's date and time in UTC, to the minute."""
    return datetime.now(UTC).strftime("%Y-%m-%d %H:%M")


def write_fixtures(results: list[ScenarioResult], fixtures_dir: Path) -> list[FixtureRow]:
    """Write fixtures for every successful result and update the README; return new rows."""
    fixtures_dir.mkdir(parents=True, exist_ok=True)
    date = utc_now()
    new = [row for r in results if r.ok for row in write_scenario_fixtures(r, fixtures_dir, date)]
    readme = fixtures_dir / "README.md"
    rows = merge_rows(read_table(readme), new, fixtures_dir)
    readme.write_text(render_readme(rows, fixtures_dir), encoding="utf-8")
    return new


def fixtures_size(fixtures_dir: Path) -> int:
    """Bytes used by all fixture logs under `fixtures_dir`."""
    return sum(p.stat().st_size for pat in ("*/*.log", "*/*.log.gz") for p in fixtures_dir.glob(pat))
