"""The bounds that keep a hostile or broken log from costing unbounded time, memory or disk.

Each has a command-line flag that raises it (docs/limits.md); they travel with the build options
so rank reports built in worker processes obey the same ones.
"""

from __future__ import annotations

from msgspec import Struct


MB = 1 << 20
SINGLE_FILE_MB = 20.0  # --single-file / pack --budget-mb: text packed beyond the pages; past it links become plain text


class Limits(Struct, frozen=True):
    max_line_mb: float = 256.0  # --max-line-mb: a longer line is a counted problem (fail_line_too_long)
    # --max-gunzip-ratio: a .gz expanding more than this many times over is refused (a bomb), once it
    # has expanded past GUNZIP_GRACE_MB; real traces compress 5-30x. 0 (--no-gunzip-limit): no limit.
    max_gunzip_ratio: float = 200.0
    max_raw_log_mb: float = 2048.0  # --max-raw-log-mb: raw.log copies at most this much of the log

    @property
    def max_line(self) -> int:
        return int(self.max_line_mb * MB)

    @property
    def max_raw_log(self) -> int:
        return int(self.max_raw_log_mb * MB)


GUNZIP_GRACE_MB = 64  # small files may have any ratio: a few MB of expansion costs nothing

# Many tiny compiles (docs/limits.md): a log of 200,000 compile ids must not cost 200,000 folders
# and an index nobody can open. Compile ids that hold nothing but their `dynamo_start` record get a
# page up to PAGED_START_ONLY of them (in log order); the rest are listed without one, and the index
# says how many. The index lists at most INDEX_ROWS compiles and compile ids (and ids per stack-trie
# node); summary.json and compile_directory.json always list them all.
PAGED_START_ONLY = 1000
INDEX_ROWS = 5000
# One compile id with millions of records (a guard logged in a loop): its page reads and lists at
# most PAGE_RECORDS_PER_KIND records of each kind per generation (its tables, texts and search
# entries come from those), and says how many more raw.jsonl holds; its own page and the index list
# at most PAGE_FILES of its files (compile_directory.json lists them all). Memory then stays flat
# however many records one id holds.
PAGE_RECORDS_PER_KIND = 1000
PAGE_FILES = 5000
# One compile id with hundreds of files of one record kind (an artifact logged in a loop): the index
# links at most INDEX_FILES_PER_KIND of them in its "Files by compile id", and a row per such kind
# says how many there are and links its own list on the compile page (which lists them all, up to
# PAGE_FILES). Real compiles write a few dozen files of a kind at most.
INDEX_FILES_PER_KIND = 200
