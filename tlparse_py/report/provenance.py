"""Inductor provenance tracking (-i): which pre-grad node became which post-grad node and kernel line.

The line mappings follow tlparse 0.4.3's algorithm exactly (../shared/spec/tlparse-0.4.3.md §9), so
the highlighter agrees with tlparse on the same logs; the Python code map is computed on the raw
output code, never on highlighted HTML (where span boundaries would move lines).
"""

from __future__ import annotations

from typing import Any

from .. import jsondepth
from ..patterns import lazy
from ..analysis.kinds.registry import provenance_inputs
from .html.escaping import script_json

_XNUMEL_DECLARATION = lazy(r"^\s*\w+\s+.*_xnumel(?:_\d+)?\s*=")



def node_lines(graph: str) -> dict[str, int]:
    """Node name → 1-based line where the graph text defines it (`name: type = op(...)`)."""
    lines: dict[str, int] = {}
    for number, text in enumerate(graph.split("\n"), start=1):
        stripped = text.strip()
        if not stripped or stripped.startswith("#"):
            continue
        name = stripped.split("=", 1)[0].split(":", 1)[0].strip()
        if name:
            lines[name] = number
    return lines


def _drop_leading_empty(text: str) -> list[str]:
    lines = text.split("\n")
    while lines and not lines[0].strip():
        lines.pop(0)
    return lines


def python_kernel_lines(code: str, kernels: list[str]) -> dict[str, list[int]]:
    """Kernel name → lines of the Python wrapper that call it (after `def call(args)`)."""
    lines = _drop_leading_empty(code)
    start = next((i for i, text in enumerate(lines) if "def" in text and "call" in text and "(args)" in text), 0)
    base = next((i for i, text in enumerate(lines) if "# AOT ID:" in text), 0)
    result: dict[str, list[int]] = {}
    for kernel in kernels:
        pure = kernel.split(":", 1)[0]
        found: list[int] = []
        if ":" in kernel:  # a debug handle: the call right after the line naming the full handle
            first = next((i for i in range(start, len(lines)) if kernel in lines[i]), None)
            if first is not None:
                after = next((j for j in range(first + 1, len(lines)) if pure in lines[j]), None)
                if after is not None:
                    found = [after + 1 - base]
        if not found:
            found = [i + 1 - base for i in range(start, len(lines)) if pure in lines[i]]
        result[kernel] = found
    return result


def _is_xnumel_declaration(text: str) -> bool:
    return "_xnumel = " in text or bool(_XNUMEL_DECLARATION.match(text))


def cpp_kernel_lines(code: str, kernels: list[str]) -> dict[str, list[int]]:
    """Kernel name → lines of the AOTInductor C++ wrapper (after `::run_impl(`) that launch it."""
    lines = _drop_leading_empty(code)
    start = next((i for i, text in enumerate(lines) if "::run_impl(" in text), 0)
    result: dict[str, list[int]] = {}
    for kernel in kernels:
        pure = kernel.rsplit(":", 1)[0]
        found: list[int] = []
        if ":" in kernel:
            for i in range(start, len(lines)):
                text = lines[i].strip()
                if not text or text.startswith(("def", "static inline void")) or kernel not in lines[i]:
                    continue
                after = next((j for j in range(i + 1, len(lines)) if pure in lines[j] and not _is_xnumel_declaration(lines[j])), None)
                if after is not None:
                    found = [after + 1]
                    break
        if not found:
            found = [i + 1 for i in range(start, len(lines)) if pure in lines[i]]
        result[kernel] = found
    return result


def _sorted_items(value: Any) -> list[tuple[str, Any]]:
    return sorted(value.items()) if isinstance(value, dict) else []


def _targets(names: Any) -> list[Any]:
    return names if isinstance(names, list) else []


def _node_map(source: Any, from_lines: dict[str, int], to_lines: dict[str, int]) -> dict[str, list[int]]:
    mapping: dict[str, list[int]] = {}
    for node, targets in _sorted_items(source):
        if node in from_lines:
            lines = [to_lines[t] for t in _targets(targets) if isinstance(t, str) and t in to_lines]
            if lines:
                mapping[str(from_lines[node])] = lines
    return mapping


def _code_to_post(kernel_to_post: Any, code_lines: dict[str, list[int]], post: dict[str, int]) -> dict[str, list[int]]:
    mapping: dict[str, list[int]] = {}
    for kernel, nodes in _sorted_items(kernel_to_post):
        targets = [post[n] for n in _targets(nodes) if isinstance(n, str) and n in post]
        for line in code_lines.get(kernel, []):
            if targets:
                mapping[str(line)] = targets
    return mapping


def _post_to_code(post_to_kernels: Any, code_lines: dict[str, list[int]], post: dict[str, int]) -> dict[str, list[int]]:
    mapping: dict[str, list[int]] = {}
    for node, kernels in _sorted_items(post_to_kernels):
        if node in post:
            lines = [line for k in _targets(kernels) if isinstance(k, str) for line in code_lines.get(k, [])]
            if lines:
                mapping[str(post[node])] = lines
    return mapping


def line_mappings(pre: str, post: str, python_code: str, cpp_code: str, node_mappings: str) -> dict[str, Any]:
    """The six line maps the highlighter uses; `{}` when the node mappings are not JSON."""
    try:
        nodes = jsondepth.loads_text(node_mappings)
    except ValueError:
        return {}
    if not isinstance(nodes, dict):
        return {}
    pre_lines, post_lines = node_lines(pre), node_lines(post)
    kernels = [k for k, _ in _sorted_items(nodes.get("cppCodeToPost"))]
    py_lines = python_kernel_lines(python_code, kernels)
    cpp_lines = cpp_kernel_lines(cpp_code, kernels)
    return {
        "preToPost": _node_map(nodes.get("preToPost"), pre_lines, post_lines),
        "postToPre": _node_map(nodes.get("postToPre"), post_lines, pre_lines),
        "pyCodeToPost": _code_to_post(nodes.get("cppCodeToPost"), py_lines, post_lines),
        "postToPyCode": _post_to_code(nodes.get("postToCppCode"), py_lines, post_lines),
        "cppCodeToPost": _code_to_post(nodes.get("cppCodeToPost"), cpp_lines, post_lines),
        "postToCppCode": _post_to_code(nodes.get("postToCppCode"), cpp_lines, post_lines),
    }


def find_inputs(artifacts: list[Any]) -> dict[str, Any]:
    """The artifact feeding each pane: the last one logged whose name starts with a known name."""
    chosen: dict[str, Any] = {}
    # which artifact feeds which pane is declared by the kinds; the first name present wins
    for pane, names in provenance_inputs().items():
        for name in names:
            match = next((a for a in reversed(artifacts) if not a.is_link and a.name.startswith(name)), None)
            if match is not None:
                chosen[pane] = match
                break
    return chosen


def panes(artifacts: list[Any], read: Any) -> dict[str, Any]:
    """Everything the three-pane highlighter page of one compile id shows."""
    inputs = find_inputs(artifacts)

    def text(pane: str) -> str:
        artifact = inputs.get(pane)
        data = read(artifact.raw or artifact.url) if artifact is not None else None
        return data.decode("utf-8", "replace") if data else ""

    pre, post, python_code, cpp_code = text("pre"), text("post"), text("python"), text("cpp")
    mappings = line_mappings(pre, post, python_code, cpp_code, text("mappings")) if "mappings" in inputs else {}
    use_cpp = "AOTInductorModel::run_impl" in cpp_code or (bool(cpp_code) and not python_code)
    code = cpp_code if use_cpp else python_code
    code_lines = _drop_leading_empty(code) if code else []
    offset = 0 if use_cpp else next((i for i, line in enumerate(code_lines) if "# AOT ID:" in line), 0)
    return {
        "pre": pre.split("\n") if pre else [],
        "post": post.split("\n") if post else [],
        "code": code_lines,
        "code_kind": "cpp" if use_cpp else "python",
        "code_offset": offset,  # mapping line n is displayed line n + offset (tlparse counts from `# AOT ID:`)
        "mappings": script_json(mappings),
        "has_data": bool(mappings),
        "inputs": {pane: artifact.url for pane, artifact in inputs.items()},
    }
