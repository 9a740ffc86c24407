"""The per-compile record of summary.json is declared once (`CompileRecord`): the shipped schema's
`$defs/compile` describes the same fields with the same types, `CompileSummary.to_dict` writes it,
and `load_summary` reads it back with the defaults of older schemas and refuses what we do not write,
naming the field."""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

import msgspec
import orjson
import pytest

import tlparse_py
from conftest import TRACES
from tlparse_py.analysis.dict_writer import dict_writer
from tlparse_py.analysis.summary import CacheLookup, CompileRecord, CompileSummary, CompileTime, Failure, GraphBreak
from tlparse_py.analysis.summary_load import SummaryError, load_summary

SCHEMA = json.loads(resources.files("tlparse_py").joinpath("summary.schema.json").read_text())
JSON_TYPES = {str: "string", bool: "boolean", int: "integer", float: "number", type(None): "null"}


def shape(node: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """What a JSON Schema node says of a value's shape: its JSON types, minimum, properties (in
    order) and items; descriptions, titles, defaults and enums' values left out (an enum is its
    values' types)."""
    while "$ref" in node:
        node = {**defs[node["$ref"].rsplit("/", 1)[-1]], **{k: v for k, v in node.items() if k != "$ref"}}
    found: dict[str, Any] = {"types": set()}
    for member in node.get("anyOf", []) + node.get("oneOf", []):
        for key, value in shape(member, defs).items():
            if key == "types":
                found["types"] |= value
            else:
                found[key] = value
    if "type" in node:
        found["types"] |= {node["type"]} if isinstance(node["type"], str) else set(node["type"])
    if "enum" in node or "const" in node:
        found["types"] |= {JSON_TYPES[type(v)] for v in node.get("enum", [node.get("const")])}
    if "minimum" in node:
        found["minimum"] = node["minimum"]
    if "properties" in node:
        found["properties"] = {name: shape(sub, defs) for name, sub in node["properties"].items()}
        found["order"] = list(node["properties"])
        found["required"] = set(node.get("required", []))
    if "items" in node:
        found["items"] = shape(node["items"], defs)
    return found


def declared(record: type = CompileRecord) -> dict[str, Any]:
    schema = msgspec.json.schema(record)
    return shape(schema, schema["$defs"])


def shipped() -> dict[str, Any]:
    return shape(SCHEMA["$defs"]["compile"], SCHEMA["$defs"])


def differences(ours: dict[str, Any], theirs: dict[str, Any], where: str = "compile") -> list[str]:
    """Where the declaration (`ours`) and the shipped schema (`theirs`) disagree. Required: a field
    the declaration requires must be required by the schema; the schema may require more (what
    tlparse-py writes today), as the declaration has defaults for what older summaries left out."""
    found = []
    if ours["types"] != theirs["types"]:
        found.append(f"{where}: types {sorted(ours['types'])} declared, {sorted(theirs['types'])} in the schema")
    if ours.get("minimum") != theirs.get("minimum"):
        found.append(f"{where}: minimum {ours.get('minimum')} declared, {theirs.get('minimum')} in the schema")
    if ("items" in ours) != ("items" in theirs):
        found.append(f"{where}: items declared or in the schema, not both")
    elif "items" in ours:
        found += differences(ours["items"], theirs["items"], f"{where}[]")
    if ("properties" in ours) != ("properties" in theirs):
        found.append(f"{where}: properties declared or in the schema, not both")
    elif "properties" in ours:
        if ours["order"] != theirs["order"]:
            found.append(f"{where}: fields {ours['order']} declared, {theirs['order']} in the schema")
        if not ours["required"] <= theirs["required"] <= set(theirs["properties"]):
            found.append(f"{where}: required {sorted(ours['required'])} declared, {sorted(theirs['required'])} in the schema")
        for name in ours["properties"].keys() & theirs["properties"].keys():
            found += differences(ours["properties"][name], theirs["properties"][name], f"{where}.{name}")
    return found


def test_the_shipped_schema_describes_the_declared_record():
    assert differences(declared(), shipped()) == []


def test_a_field_declared_and_not_in_the_schema_is_found():
    class Grown(CompileRecord):
        compiled_autograd: bool = False

    assert differences(declared(Grown), shipped()) == [f"compile: fields {[*shipped()['order'], 'compiled_autograd']} declared, {shipped()['order']} in the schema"]
    bent = shipped()
    bent["properties"]["compile_time_s"]["properties"]["total"]["types"] = {"string"}
    assert differences(declared(), bent) == ["compile.compile_time_s.total: types ['null', 'number'] declared, ['string'] in the schema"]


# ------------------------------------------------------------------------------------------------
# written and read back


def as_json(data: Any) -> Any:
    return orjson.loads(orjson.dumps(data))


def record_of(compile_: CompileSummary) -> CompileRecord:
    """Its record, field by field as declared (its graph breaks by their own record)."""
    values = {name: getattr(compile_, name) for name in CompileRecord.__struct_fields__}
    return CompileRecord(**{**values, "graph_breaks": [b.record() for b in compile_.graph_breaks]})


@pytest.mark.parametrize("scenario", ["graph_break", "recompile", "failure", "cache", "retry_fullgraph", "reset_reuse", "training", "dynamic_backward"])
def test_compiles_are_written_as_declared_and_read_back(scenario):
    compiles = tlparse_py.analyze(TRACES / scenario).summary().compiles
    written = [c.to_dict() for c in compiles]
    assert written == [msgspec.to_builtins(record_of(c)) for c in compiles]  # the fast writer is msgspec's encoding
    data = as_json({"schema_version": "2.0", "compiles": written})
    assert [c.to_dict() for c in load_summary(data).compiles] == data["compiles"]


def test_the_writer_follows_the_declaration():
    class Grown(CompileRecord):
        first_failure: Failure | None = None
        retries: list[Failure] = []
        times: CompileTime = CompileTime()

    grown = Grown("[0/0]", attempts=["[0/0]"], cause="first", first_failure=Failure("E", "boom"), retries=[Failure("F")],
                  graph_breaks=[GraphBreak("r", "a.py:1", hints=("h",)).record()], cache=[CacheLookup("fx_graph", "hit")])
    assert dict_writer(Grown)(grown) == msgspec.to_builtins(grown)


def test_older_schemas_read_with_their_defaults():
    """Schema 1.0 wrote no attempts, generation, status, cause or restart reasons, and graph breaks
    had no registry fields (1.3); times left out are unknown."""
    data = {"schema_version": "1.0", "compiles": [
        {"id": "[0/0]", "frame": "f", "user_location": "a.py:1", "compile_time_s": {"total": 2},
         "graph_breaks": [{"reason": "r", "user_location": "a.py:2"}], "cache": [{"cache": "fx_graph", "result": "hit"}]},
        {"id": "[0/1]", "failure": {"type": "RuntimeError"}},
    ]}
    first, second = load_summary(data).compiles
    assert first.attempts == ["[0/0]"] and first.generation == 0 and first.status == "missing" and first.cause == "first"
    assert first.compile_time_s.total == 2 and first.compile_time_s.forward is None and first.compile_time_s.backward_in_forward is None
    (brk,) = first.graph_breaks
    assert (brk.reason, brk.user_location, brk.registry_id, brk.hints, brk.library_location) == ("r", "a.py:2", "", (), "")
    assert first.cache[0].reason == "" and first.restart_reasons == [] and first.failure is None
    assert second.is_recompile and second.url is None and second.pages == [("[0/1]", None)]
    assert second.failure is not None and second.failure.reason is None and second.compile_time_s.total is None


@pytest.mark.parametrize("change, field", [
    ({"id": 3}, "compiles[1].id"),
    ({"id": "nope"}, "compiles[1].id"),
    ({"url": 1}, "compiles[1].url"),
    ({"generation": True}, "compiles[1].generation"),
    ({"generation": -1}, "compiles[1].generation"),
    ({"attempts": None}, "compiles[1].attempts"),
    ({"attempts": ["[0/1]", 2]}, "compiles[1].attempts[1]"),
    ({"status": None}, "compiles[1].status"),
    ({"compile_time_s": {"forward": -1.0}}, "compiles[1].compile_time_s.forward"),
    ({"compile_time_s": {"total": "1"}}, "compiles[1].compile_time_s.total"),
    ({"compile_time_s": {"backward": float("nan")}}, "compiles[1].compile_time_s.backward"),
    ({"graph_breaks": [{"reason": "r"}]}, "compiles[1].graph_breaks[0]"),
    ({"graph_breaks": [{"reason": "r", "user_location": "a.py:1", "hints": "h"}]}, "compiles[1].graph_breaks[0].hints"),
    ({"cache": [{"cache": "fx_graph", "result": None}]}, "compiles[1].cache[0].result"),
    ({"graph_op_count": 1.5}, "compiles[1].graph_op_count"),
    ({"failure": "boom"}, "compiles[1].failure"),
    ({"failure": {"type": "E", "reason": 3}}, "compiles[1].failure.reason"),
])
def test_what_we_do_not_write_is_refused_naming_the_field(change, field):
    good = {"id": "[0/0]", "frame": "f", "user_location": "a.py:1"}
    data = {"schema_version": "2.0", "compiles": [good, {**good, "id": "[0/1]", **change}]}
    with pytest.raises(SummaryError) as refused:
        load_summary(data)
    assert str(refused.value).startswith(f"{field}: "), str(refused.value)


def test_a_rank_summary_names_its_rank():
    rank = {"schema_version": "2.0", "compiles": [{"id": "[0/0]", "compile_time_s": {"total": -1}}]}
    data = {"schema_version": "2.0", "ranks": [{"rank": 0, "folder": "rank_0", "error": None, "summary": rank}]}
    with pytest.raises(SummaryError, match=r"^ranks\[0\]\.summary\.compiles\[0\]\.compile_time_s\.total: "):
        load_summary(data)
    with pytest.raises(SummaryError, match=r"^compiles\[0\]: expected `object`, got `int`"):
        load_summary({"schema_version": "2.0", "compiles": [3]})
