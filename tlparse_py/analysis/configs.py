"""The settings each compile ran with, and which of them differ between compiles.

Every `compilation_metrics` record carries torch's config modules as JSON text (`dynamo_config`:
torch._dynamo.config, `inductor_config`, `compiler_config`, `functorch_config`), whole, 30-40 KB
a compile. A setting that differs between two compiles of a frame (say a compile that ran inside
`torch._dynamo.config.patch(capture_scalar_outputs=True)` and its recompile outside it) can be the
whole reason the second one broke the graph, and nothing else in the log says so.

`ConfigSnapshots` keeps each distinct logged text once, parsed, in the analysis' fact spool (a
compile's metrics entry holds only the number of its combination of texts, so memory does not grow
with the compiles), and answers the two questions asked of it: which settings changed between two
compiles (`changes_between`), and which settings of a compile differ from the value most of the
run's compiles had (`unusual`). torch 2.13 changes no setting from one compile of a frame to the
next by itself (checked on every fixture and corpus log), so every setting is compared there; across
functions, the settings torch.compile's own arguments set (`dynamic=`: PER_FUNCTION) differ by design
and have no usual value. A module not logged as a JSON object by either compile is not compared:
unknown, never "unchanged".
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterable
from typing import Annotated, Any, Protocol

from msgspec import Meta, Struct

from .. import jsondepth

# the compilation_metrics fields that hold a config module, and the module each is
CONFIG_MODULES = (
    ("dynamo_config", "torch._dynamo.config"),
    ("inductor_config", "torch._inductor.config"),
    ("compiler_config", "torch.compiler.config"),
    ("functorch_config", "torch._functorch.config"),
)
# Distinct logged texts of one config module beyond which no usual value is claimed for it: finding
# the settings that differ costs a pass over each text's settings (600 of Inductor's).
USUAL_MAX_SNAPSHOTS = 256
SHOWN_CHANGES = 3  # changes a one-line headline names before "and N more"
# Settings torch.compile's own arguments set for the function it compiles (`dynamic=` patches these
# two, `shapes=` the spec, around each of its compiles: eval_frame.make_set_enable_dynamic): they
# differ between two functions compiled with different arguments by design, so the run's usual value
# of one says nothing of a compile. Between two compiles of one frame they are compared like any other.
PER_FUNCTION = frozenset({"assume_static_by_default", "automatic_dynamic_shapes", "_shapes_spec"})
_CACHED = 16  # parsed snapshots and answers kept in memory


def python_literal(value: Any) -> str:
    """A logged setting's value as Python writes it (`True`, `None`, `'max-autotune'`, `[1, 2]`):
    how the program sets it (`torch._dynamo.config.x = True`). The value is the JSON torch logged,
    read back: exact, whatever its length."""
    return repr(value)


class ConfigChange(Struct, gc=False):
    """A setting whose value differs between a frame's previous compile and this one; also
    summary.json's `config_changes.changes[]` as it is (fields = keys, in order)."""

    setting: str  # the module and the setting: "torch._dynamo.config.capture_scalar_outputs"
    before: Any  # its value in the previous compile, as logged (JSON)
    after: Any  # its value in this one

    @property
    def name(self) -> str:
        """The setting without its module: `capture_scalar_outputs`, `triton.cudagraphs`."""
        return setting_name(self.setting)

    @property
    def text(self) -> str:
        """`torch._dynamo.config.capture_scalar_outputs: True → False`."""
        return f"{self.setting}: {python_literal(self.before)} → {python_literal(self.after)}"


class ConfigDiff(Struct, gc=False):
    """How a compile's logged config differs from its frame's previous compile's; also summary.json's
    `config_changes` as it is. `changes` empty: the same settings, in every module both logged."""

    since: str  # the frame's previous compile (`[0/0]`)
    changes: list[ConfigChange]

    @property
    def headline(self) -> str:
        """The changes in one line ("" for none), the first few named."""
        if not self.changes:
            return ""
        named = ", ".join(c.text for c in self.changes[:SHOWN_CHANGES])
        more = len(self.changes) - SHOWN_CHANGES
        return f"config changed since {self.since}: {named}" + (f" and {more} more" if more > 0 else "")

    def note(self, change: ConfigChange, label: str) -> str:
        """What a graph break of compile `label` that names `change` is told: `torch._dynamo.config.
        capture_scalar_outputs was True for [0/1]'s previous compile [0/0] (False for [0/1])`."""
        return (f"{change.setting} was {python_literal(change.before)} for {label}'s previous compile {self.since} "
                f"({python_literal(change.after)} for {label})")


class UnusualSetting(Struct, gc=False):
    """A setting whose value in this compile differs from the one most of the run's compiles had;
    also summary.json's `config_unusual[]` as it is."""

    setting: str
    value: Any  # this compile's
    usual: Any  # the value more than half the compiles that logged the setting had
    usual_compiles: Annotated[int, Meta(ge=0)]  # how many had it
    compiles: Annotated[int, Meta(ge=0)]  # how many compiles logged the setting

    @property
    def text(self) -> str:
        """`torch._dynamo.config.capture_scalar_outputs = True (False in 3 of the run's 4 compiles)`."""
        return (f"{self.setting} = {python_literal(self.value)} ({python_literal(self.usual)} in {self.usual_compiles} "
                f"of the run's {self.compiles} compiles)")


def setting_name(setting: str) -> str:
    """A setting's name without its module (`torch._inductor.config.triton.cudagraphs` → `triton.cudagraphs`)."""
    for _, module in CONFIG_MODULES:
        if setting.startswith(module + "."):
            return setting[len(module) + 1 :]
    return setting


def names_setting(texts: Iterable[str], change: ConfigChange) -> bool:
    """Whether one of `texts` (a graph break's reason, explanation and hints) names the setting:
    `capture_scalar_outputs=False`, `torch._dynamo.config.capture_scalar_outputs = True`. A name
    with no `_` or `.` (Inductor's `debug`) counts only written as `config.<name>`: as a bare word it
    is English."""
    name = change.name
    word = rf"(?<!\w){re.escape(name)}(?![\w.])" if "_" in name or "." in name else rf"config\.{re.escape(name)}(?![\w.])"
    pattern = re.compile(word)
    return any(pattern.search(text) for text in texts if text)


class Spool(Protocol):
    """Where parsed snapshots are kept (the analysis' `spools.FactSpool`)."""

    def add(self, key: Any, value: Any) -> None: ...

    def get(self, key: Any) -> list[Any]: ...


Combination = tuple[str | None, ...]  # the digest of each module's logged text, in CONFIG_MODULES order; None: not a JSON object


class ConfigSnapshots:
    """Every distinct config text the log's compiles logged, each parsed once and kept in `spool`;
    each combination of them (one per config module) numbered, in the order first read."""

    def __init__(self, spool: Spool):
        self.spool = spool
        self.combinations: list[Combination] = []
        self._numbers: dict[Combination, int] = {}
        self._parsed: dict[str, bool] = {}  # digest → whether its text was a JSON object (spooled)
        self._last: dict[str, tuple[str, str | None]] = {}  # field → (its last text, digest): most compiles log the same
        self._loaded: dict[str, dict[str, Any]] = {}  # digest → settings, the last few read back
        self._answers: dict[tuple[int, int], list[ConfigChange] | None] = {}  # (before, after) → changes_between

    def note(self, metrics: dict[str, Any]) -> int | None:
        """The number of the config a compilation_metrics record logged; None when it logged none."""
        combination = tuple(self._digest(name, metrics.get(name)) for name, _ in CONFIG_MODULES)
        if all(digest is None for digest in combination):
            return None
        number = self._numbers.get(combination)
        if number is None:
            number = self._numbers[combination] = len(self.combinations)
            self.combinations.append(combination)
        return number

    def _digest(self, name: str, text: Any) -> str | None:
        if not isinstance(text, str):
            return None
        last = self._last.get(name)
        if last is not None and last[0] == text:
            return last[1]
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
        if digest not in self._parsed:
            settings = _settings(text)
            self._parsed[digest] = settings is not None
            if settings is not None:
                self.spool.add(("config", digest), settings)
        known = digest if self._parsed[digest] else None
        self._last[name] = (text, known)
        return known

    def settings(self, digest: str) -> dict[str, Any] | None:
        """The settings of one logged text (read back from the spool; the last few kept); None when
        the spool no longer holds them (a copied analysis leaves its spool behind): unknown."""
        found = self._loaded.get(digest)
        if found is None:
            stored = self.spool.get(("config", digest))
            if not stored:
                return None
            found = stored[0]
            if len(self._loaded) >= _CACHED:
                self._loaded.pop(next(iter(self._loaded)))
            self._loaded[digest] = found
        return found

    def changes_between(self, before: int | None, after: int | None) -> list[ConfigChange] | None:
        """The settings whose values differ between two compiles' configs (numbers from `note`), in
        module order and by name; None when no module was logged as JSON by both (unknown)."""
        if before is None or after is None:
            return None
        key = (before, after)
        if key not in self._answers:
            if len(self._answers) >= _CACHED:
                self._answers.pop(next(iter(self._answers)))
            self._answers[key] = self._changes(self.combinations[before], self.combinations[after])
        answer = self._answers[key]
        return list(answer) if answer is not None else None

    def _changes(self, before: Combination, after: Combination) -> list[ConfigChange] | None:
        compared = False
        changes: list[ConfigChange] = []
        for (_, module), old, new in zip(CONFIG_MODULES, before, after):
            if old is None or new is None:
                continue
            old_settings, new_settings = (self.settings(old), self.settings(new)) if old != new else ({}, {})
            if old_settings is None or new_settings is None:
                continue
            compared = True
            for name in sorted(old_settings.keys() & new_settings.keys()):  # a setting one torch lacks is not compared
                if not same(old_settings[name], new_settings[name]):
                    changes.append(ConfigChange(f"{module}.{name}", old_settings[name], new_settings[name]))
        return changes if compared else None

    def unusual(self, counts: Counter[int]) -> dict[int, list[UnusualSetting]]:
        """For each config (number from `note`) that `counts` compiles logged, the settings whose
        value differs from the one more than half of the compiles that logged the setting had. No
        setting has a usual value without such a majority, nor in a module logged in more than
        USUAL_MAX_SNAPSHOTS distinct texts, nor one of torch.compile's own arguments (PER_FUNCTION)."""
        found: dict[int, list[UnusualSetting]] = {number: [] for number in counts}
        for index, (_, module) in enumerate(CONFIG_MODULES):
            by_digest: Counter[str] = Counter()
            for number, count in counts.items():
                digest = self.combinations[number][index]
                if digest is not None:
                    by_digest[digest] += count
            if len(by_digest) < 2 or len(by_digest) > USUAL_MAX_SNAPSHOTS:
                continue
            odd = self._unusual_in(module, by_digest, PER_FUNCTION if module == "torch._dynamo.config" else frozenset())
            for number in counts:
                digest = self.combinations[number][index]
                if digest is not None:
                    found[number].extend(odd.get(digest, []))
        return found

    def _unusual_in(self, module: str, by_digest: Counter[str], left_out: frozenset[str]) -> dict[str, list[UnusualSetting]]:
        """Per distinct text of one module, its settings (but `left_out`) that differ from their usual value."""
        read = {digest: self.settings(digest) for digest in by_digest}
        snapshots = {digest: settings for digest, settings in read.items() if settings is not None}
        if len(snapshots) < len(read):
            return {}  # a text no longer at hand: no usual value can be told
        first = next(iter(snapshots.values()))
        differing = sorted({name for settings in snapshots.values() for name in settings.keys() | first.keys()
                            if name not in left_out and (name not in settings or name not in first or not same(settings[name], first[name]))})
        odd: dict[str, list[UnusualSetting]] = {}
        for name in differing:
            tally: Counter[str] = Counter()
            value_of: dict[str, Any] = {}
            for digest, settings in snapshots.items():
                if name in settings:
                    shown = _canonical(settings[name])
                    tally[shown] += by_digest[digest]
                    value_of[shown] = settings[name]
            total = sum(tally.values())
            usual, usual_count = tally.most_common(1)[0] if tally else ("", 0)
            if 2 * usual_count <= total:
                continue  # no majority: no claim
            for digest, settings in snapshots.items():
                if name in settings and _canonical(settings[name]) != usual:
                    odd.setdefault(digest, []).append(
                        UnusualSetting(f"{module}.{name}", settings[name], value_of[usual], usual_count, total))
        return odd


def same(a: Any, b: Any) -> bool:
    """Whether two logged values are the same value: of one JSON type (`1`, `1.0` and `true` are
    three values, which Python's == would call equal), NaN equal to NaN."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return a == b or (a != a and b != b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def _canonical(value: Any) -> str:
    """A value as one text, so that `same` values tally together."""
    return f"{type(value).__name__}:{json.dumps(value, sort_keys=True)}"


def _settings(text: str) -> dict[str, Any] | None:
    """A logged config text's settings; None when it is not a JSON object (torch logs "Inductor
    Config cannot be pickled" and the like when it could not write one)."""
    try:
        value = jsondepth.loads_text(text)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None
