"""Coverage-guided fuzzing of the log reader (atheris): any bytes must give records and counted
problems, never an exception.

    pip install atheris
    python fuzz/fuzz_reader.py -max_total_time=600 fuzz/corpus   # seeds: the harness fixtures

Not part of the test suite (it needs atheris and runs for minutes); tests/test_fuzz.py runs the
same property with hypothesis on every CI run.
"""

from __future__ import annotations

import gzip
import io
import sys
from pathlib import Path

import atheris

with atheris.instrument_imports():
    from tlparse_py.model import Stats
    from tlparse_py.reading.records import DiagnosticLog, LogReader

HERE = Path(__file__).resolve().parent
COUNT = {"inputs": 0, "records": 0}


class MemoryLog(LogReader):
    """The reader over an in-memory log (same code path as a file, without the disk)."""

    def __init__(self, data: bytes):
        super().__init__(Path("fuzz.log"), Stats(), DiagnosticLog(limit=20), year=2026)
        self.data = data

    def records(self):
        yield from self._records(io.BytesIO(self.data))


def test_one(data: bytes) -> None:
    COUNT["inputs"] += 1
    reader = MemoryLog(data)
    for record in reader.records():
        COUNT["records"] += 1
        assert isinstance(record.envelope, dict)
        assert record.lineno >= 1
    assert reader.stats["ok"] + reader.stats["other_rank"] >= 0


def seeds(folder: Path) -> None:
    """Write the fixtures (cut into 64 KB pieces) as the starting corpus."""
    folder.mkdir(parents=True, exist_ok=True)
    for log in sorted((HERE.parent / "tests" / "fixtures" / "traces").rglob("dedicated_log*")):
        data = gzip.decompress(log.read_bytes()) if log.name.endswith(".gz") else log.read_bytes()
        for i in range(0, min(len(data), 512 * 1024), 64 * 1024):
            (folder / f"{log.stem}_{i}").write_bytes(data[i : i + 64 * 1024])


if __name__ == "__main__":
    corpus = next((Path(a) for a in sys.argv[1:] if not a.startswith("-")), None)
    if corpus is not None and not any(corpus.glob("*")):
        seeds(corpus)
    import atexit

    atexit.register(lambda: print(f"\nfuzz_reader: {COUNT['inputs']:,} inputs, {COUNT['records']:,} records read", file=sys.stderr))
    atheris.Setup(sys.argv, test_one)
    atheris.Fuzz()
