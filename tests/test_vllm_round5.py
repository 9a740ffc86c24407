"""vLLM, round 5 (issue 47, items 12-14): a too-deep compilation config, pass diffs that stay
near-linear on graphs whose layers repeat the same lines, and one diff page per piece and pass."""

from __future__ import annotations

import difflib
import gzip
import json
import random
import re
from pathlib import Path

import pytest

import tlparse_py
from tlparse_py import linediff
from tlparse_py.jsondepth import MAX_JSON_DEPTH
from tlparse_py.linediff import LineMatcher, changed_lines

FIXTURE = next((Path(__file__).resolve().parent / "fixtures" / "traces" / "vllm_piecewise").glob("*.log.gz"))


@pytest.fixture(scope="module")
def piecewise(tmp_path_factory):
    out = tmp_path_factory.mktemp("vllm5") / "out"
    tlparse_py.build(FIXTURE, out)
    return out, json.loads((out / "summary.json").read_text())


def test_a_config_nested_300_deep_is_a_damaged_record_not_a_crash(tmp_path):
    """The config is refused by the bounded decode (counted as fail_vllm_json, said on the summary
    page); the report is written, and the config's file keeps its text."""
    lines = gzip.decompress(FIXTURE.read_bytes()).decode().split("\n")
    at = next(i for i, text in enumerate(lines) if "vllm_compilation_config" in text) + 1
    lines[at] = '\t{"deep": ' + "[" * 300 + "]" * 300 + ", " + lines[at][2:]
    log = tmp_path / "deep.log"
    log.write_text("\n".join(lines))
    out = tmp_path / "out"
    tlparse_py.build(log, out)
    summary = json.loads((out / "summary.json").read_text())
    assert summary["stats"]["fail_vllm_json"] == 1
    [call] = summary["vllm"]["calls"]
    assert call["config"] is None and summary["vllm"]["damaged"] == 1
    assert "Its vllm_compilation_config could not be read." in call["missing"]
    assert len(call["pieces"]) == 6
    assert f"deeper than {MAX_JSON_DEPTH} levels" in (out / "tlparse_index.html").read_text()


def test_each_piece_links_its_own_diff_page_whose_counts_are_the_summarys(piecewise):
    out, summary = piecewise
    [call] = summary["vllm"]["calls"]
    passes = [change for piece in call["pieces"] for change in piece["passes"]]
    assert len(call["pieces"]) == 6 and len(passes) == 12
    assert len({change["diff"] for change in passes}) == 12
    for change in passes:
        page = (out / change["diff"]).read_text()
        assert f'<span class="added">+{change["added"]}</span> <span class="removed">−{change["removed"]}</span>' in page
        assert page.count("code-cell diff-add") == change["added"] and page.count("code-cell diff-del") == change["removed"]
        assert change["graph"].rpartition("/")[2] in page  # the page of this piece's graph, not another's
    # the first piece keeps upstream tlparse's name; later ones are numbered before `.diff.html`
    first = call["pieces"][0]["passes"][0]["diff"]
    assert first.endswith("/vllm_post_grad.0.SinCosFusionPass.diff.html")
    assert all(re.search(r"_\d+\.diff\.html$", change["diff"]) for piece in call["pieces"][1:] for change in piece["passes"])


def test_every_diff_page_is_listed_once_in_the_compile_directory(piecewise):
    out, summary = piecewise
    directory = json.loads((out / "compile_directory.json").read_text())
    pages = [a["url"] for entries in directory.values() for a in entries["artifacts"] if a["name"].endswith(".diff.html")]
    assert len(pages) == len(set(pages)) == 12


# -- the line diff --------------------------------------------------------------------------------


def layered_graph(layers: int, fused: bool) -> list[str]:
    """A graph of transformer layers whose source comments repeat in every layer; the pass fuses
    silu and mul in each layer (two lines become one)."""
    lines = ["class GraphModule(torch.nn.Module):", "    def forward(self, x_0):"]
    v = 0
    for layer in range(layers):
        for k in range(10):
            lines.append(f"        # File: /models/llama.py:{100 + k} in forward, code: hidden = self.block{k}(hidden)")
            lines.append(f"        mm_{v} = torch.ops.aten.mm.default(x_{v}, w_{layer}_{k});  x_{v} = None")
            v += 1
        lines.append("        # File: /models/llama.py:200 in forward, code: act = F.silu(gate) * up")
        if fused:
            lines.append(f"        silu_mul_{layer} = torch.ops.vllm.silu_and_mul.default(mm_{v - 1})")
        else:
            lines += [f"        silu_{layer} = torch.ops.aten.silu.default(mm_{v - 1})",
                      f"        mul_{layer} = torch.ops.aten.mul.Tensor(silu_{layer}, mm_{v - 2})"]
        lines.append(f"        x_{v} = torch.ops.aten.add.Tensor(mm_{v - 1}, 1)")
    lines.append("        return (x_0,)")
    return lines


def rebuilt(a: list[str], b: list[str]) -> list[str]:
    """b, rebuilt from a and the matcher's opcodes (which must say only true things)."""
    out: list[str] = []
    for tag, a0, a1, b0, b1 in LineMatcher(a, b).get_opcodes():
        if tag == "equal":
            assert a[a0:a1] == b[b0:b1]
            out += a[a0:a1]
        else:
            out += b[b0:b1]
    return out


def test_the_opcodes_rebuild_the_new_text():
    rng = random.Random(5)
    for _ in range(2000):
        a = [rng.choice("abcdefg") for _ in range(rng.randint(0, 40))]
        b = list(a)
        for _ in range(rng.randint(0, 6)):
            if b and rng.random() < 0.5:
                del b[rng.randrange(len(b))]
            else:
                b.insert(rng.randint(0, len(b)), rng.choice("abcdefghij"))
        assert rebuilt(a, b) == b
        list(LineMatcher(a, b).get_grouped_opcodes(3))


def test_counts_are_difflibs_on_a_layered_graph():
    a, b = layered_graph(40, False), layered_graph(40, True)
    plain = difflib.SequenceMatcher(None, a, b, autojunk=False).get_opcodes()
    removed = sum(a1 - a0 for tag, a0, a1, _, _ in plain if tag in ("replace", "delete"))
    added = sum(b1 - b0 for tag, _, _, b0, b1 in plain if tag in ("replace", "insert"))
    assert changed_lines(a, b) == (added, removed) == (40, 80)


def test_difflib_only_sees_small_gaps_however_many_layers(monkeypatch):
    """Near-linear: the unique lines anchor every layer, so what is left to difflib (whose search is
    lines × repeats) is a few lines at a time, for 16,000 lines as for 1,000 (no wall time asserted)."""
    seen: list[int] = []
    real = difflib.SequenceMatcher

    def counting(isjunk, a, b, autojunk):
        seen.append(len(a) * len(b))
        return real(isjunk, a, b, autojunk=autojunk)

    monkeypatch.setattr(linediff.difflib, "SequenceMatcher", counting)
    for layers in (40, 640):
        seen.clear()
        a, b = layered_graph(layers, False), layered_graph(layers, True)
        assert changed_lines(a, b) == (layers, 2 * layers)
        assert max(seen, default=0) <= 4


def test_a_huge_gap_without_a_unique_line_is_replaced_whole():
    a = ["x", "y"] * 2000
    b = ["y", "x"] * 2000 + ["z", "z"]
    assert (len(a) - 1) * (len(b) - 1) > linediff.FALLBACK_CELLS
    assert rebuilt(a, b) == b
