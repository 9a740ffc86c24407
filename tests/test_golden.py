"""Golden-page tests: whole report pages of two real traces, kept as gold files (syrupy snapshots).

In the manner of coverage.py's gold files: each test renders a report from a real TORCH_TRACE
fixture (`tests/fixtures/traces/graph_break` and `.../training`), scrubs the parts that may
differ between two runs or two machines, and compares a page with its gold copy under
`tests/__snapshots__/test_golden/`. Any unintended change to a page -- markup, wording, numbering,
links, highlighting -- fails here with a diff.

Pages kept per fixture: `index.html`, the compile page of `[0/0]` (and, for graph_break, of
its restart attempt `[0/0_1]`), `failures_and_restarts.html`, the `compilation_metrics_*.html`
page of one compile (kept under a stable name, whatever its artifact number), and
`compile_directory.json` and `summary.json` (parsed, kept as JSON). Whole pages are kept,
not summaries: all of them together come to about 1 MB.

Scrubbed before comparison (see `scrub`):
  * the absolute path of the temporary input folder (the fixture is copied there, so its
    path is run-dependent) -> `[INPUT_DIR]`, and of the output folder -> `[OUTPUT_DIR]`;
  * the tool version (`tlparse-py X.Y.Z` in each page's generator meta tag and footer, and
    `generator.version` in summary.json) -> `[VERSION]`.
(The placeholders use brackets, not angle brackets, so a gold page still opens as a page.)
Compile times, timestamps and durations shown on the pages come from the log itself (fixed
data), so they are NOT scrubbed. Nothing else varies between runs: `test_report_is_deterministic`
renders every fixture twice, from different input and output folders (once with highlighting
worker processes, once without) and checks that every scrubbed file of the two reports is equal.

Syntax highlighting comes from Pygments, so a Pygments upgrade that changes its markup shows up
here too; that is deliberate (it changes the pages users see).

Updating the gold files after an INTENDED change to the pages:

    python -m pytest -q tests/test_golden.py --snapshot-update

then review the diff of `tests/__snapshots__/test_golden/` (`git diff --stat`, then `git diff`
on the pages you expected to change) before committing it: every changed line should be one you
meant to change. A gold file that no test uses any more is reported as unused, and deleted by
`--snapshot-update`.
"""

from __future__ import annotations

import json
import re
import os
import shutil
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode

from tlparse_py import __version__
from tlparse_py.pipeline import Options, write_report

TRACES = Path(__file__).resolve().parent / "fixtures" / "traces"
SCENARIOS = ("graph_break", "training")

INPUT_PLACEHOLDER = "[INPUT_DIR]"
OUTPUT_PLACEHOLDER = "[OUTPUT_DIR]"
VERSION_PLACEHOLDER = "[VERSION]"


class HTMLSnapshotExtension(SingleFileSnapshotExtension):
    """One readable `.html` gold file per page (text mode, UTF-8)."""

    _write_mode = WriteMode.TEXT
    file_extension = "html"


# (id, scenario, page): `page` is a path in the report; `*` picks the one file matching it.
PAGES = [
    ("graph_break-index", "graph_break", "index.html"),
    ("graph_break-compile_0_0_0", "graph_break", "-_0_0_0/index.html"),
    ("graph_break-compile_0_0_1_restart", "graph_break", "-_0_0_1/index.html"),
    ("graph_break-failures_and_restarts", "graph_break", "failures_and_restarts.html"),
    ("graph_break-compilation_metrics_0_0_1", "graph_break", "-_0_0_1/compilation_metrics_*.html"),
    ("training-index", "training", "index.html"),
    ("training-compile_0_0_0", "training", "-_0_0_0/index.html"),
    ("training-failures_and_restarts", "training", "failures_and_restarts.html"),
    ("training-compilation_metrics_0_0_0", "training", "-_0_0_0/compilation_metrics_*.html"),
]
JSON_FILES = [
    (f"{scenario}-{name.removesuffix('.json')}", scenario, name)
    for scenario in SCENARIOS
    for name in ("compile_directory.json", "summary.json")
]


# -- making and scrubbing reports -----------------------------------------------------------


def fixture_log(scenario: str) -> Path:
    logs = sorted((TRACES / scenario).glob("*.log*"))
    assert len(logs) == 1, f"expected one trace in {TRACES / scenario}, found {logs}"
    return logs[0]


def render(scenario: str, base: Path, **options) -> tuple[Path, Path]:
    """Copy the fixture into `base/input/` and write its report to `base/report/`."""
    input_dir = base / "input"
    input_dir.mkdir(parents=True)
    log = input_dir / fixture_log(scenario).name
    shutil.copyfile(fixture_log(scenario), log)
    # glog lines carry no year: the reader takes it from the file's mtime, so pin it (2026-12-01)
    os.utime(log, (1796083200, 1796083200))
    out = base / "report"
    write_report(log, out, options=Options(**options))
    return input_dir, out


def _path_forms(path: Path) -> list[str]:
    """How a folder's path may be spelled in a page: plain, POSIX, and its resolved form."""
    forms = {str(path), path.as_posix(), str(path.resolve()), path.resolve().as_posix()}
    return sorted(forms, key=len, reverse=True)  # longest first, so no form eats part of another


_VERSION_RE = re.compile(r"tlparse-py " + re.escape(__version__) + r"\b")


def scrub(text: str, input_dir: Path, out: Path) -> str:
    """Replace the run- and machine-dependent parts of a page with placeholders."""
    for form in _path_forms(out):
        text = text.replace(form, OUTPUT_PLACEHOLDER)
    for form in _path_forms(input_dir):
        text = text.replace(form, INPUT_PLACEHOLDER)
    return _VERSION_RE.sub(f"tlparse-py {VERSION_PLACEHOLDER}", text)


def scrub_json(value, input_dir: Path, out: Path):
    if isinstance(value, dict):
        return {key: scrub_json(item, input_dir, out) for key, item in value.items()}
    if isinstance(value, list):
        return [scrub_json(item, input_dir, out) for item in value]
    if isinstance(value, str):
        return scrub(value, input_dir, out)
    return value


def scrub_summary(summary: dict, input_dir: Path, out: Path) -> dict:
    summary = scrub_json(summary, input_dir, out)
    generator = summary.get("generator", {})
    if generator.get("version") == __version__:
        generator["version"] = VERSION_PLACEHOLDER
    return summary


def resolve_page(out: Path, page: str) -> Path:
    matches = sorted(out.glob(page))
    assert len(matches) == 1, f"expected exactly one {page} in the report, found {[str(m) for m in matches]}"
    return matches[0]


@pytest.fixture(scope="module")
def reports(tmp_path_factory) -> dict[str, tuple[Path, Path]]:
    """scenario -> (input folder, report folder), each rendered once per module."""
    return {scenario: render(scenario, tmp_path_factory.mktemp(f"golden_{scenario}")) for scenario in SCENARIOS}


# -- the gold pages ---------------------------------------------------------------------------


@pytest.mark.parametrize(("scenario", "page"), [p[1:] for p in PAGES], ids=[p[0] for p in PAGES])
def test_page(reports, snapshot, scenario, page):
    input_dir, out = reports[scenario]
    text = resolve_page(out, page).read_text(encoding="utf-8")
    scrubbed = scrub(text, input_dir, out)
    assert str(input_dir) not in scrubbed and str(out) not in scrubbed
    assert scrubbed == snapshot.use_extension(HTMLSnapshotExtension)


@pytest.mark.parametrize(("scenario", "name"), [j[1:] for j in JSON_FILES], ids=[j[0] for j in JSON_FILES])
def test_json(reports, snapshot, scenario, name):
    input_dir, out = reports[scenario]
    data = json.loads((out / name).read_text(encoding="utf-8"))
    scrubbed = scrub_summary(data, input_dir, out) if name == "summary.json" else scrub_json(data, input_dir, out)
    assert scrubbed == snapshot.use_extension(JSONSnapshotExtension)


# -- determinism: what the gold files rely on ---------------------------------------------------


def _scrubbed_tree(input_dir: Path, out: Path) -> dict[str, str | bytes]:
    tree: dict[str, str | bytes] = {}
    for path in sorted(p for p in out.rglob("*") if p.is_file()):
        data = path.read_bytes()
        try:
            tree[path.relative_to(out).as_posix()] = scrub(data.decode("utf-8"), input_dir, out)
        except UnicodeDecodeError:
            tree[path.relative_to(out).as_posix()] = data
    return tree


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_report_is_deterministic(tmp_path, scenario):
    """Two runs from different input and output folders give the same scrubbed report, file by file."""
    first = _scrubbed_tree(*render(scenario, tmp_path / "first"))
    second = _scrubbed_tree(*render(scenario, tmp_path / "elsewhere" / "second_run", workers=1))
    assert sorted(first) == sorted(second), "the two reports hold different files"
    differing = [name for name in first if first[name] != second[name]]
    assert not differing, f"files that differ between two runs after scrubbing: {differing}"
    # the scrub found everything that names the run's folders
    for name, text in first.items():
        if isinstance(text, str):
            assert str(tmp_path) not in text, f"{name} still names the temporary folder"
