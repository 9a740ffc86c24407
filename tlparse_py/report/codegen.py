"""Page templates (Jinja source) → Python modules that run on `templating` alone.

Jinja parses each template and works out its scopes (which `l_<level>_<name>` variable each name
is, and where it is first set: its `idtracking`, exactly as its own compiler does); this writes the
code Jinja's compiler would write for the same nodes, calling the helpers of `templating` instead of
Jinja's runtime. Only the parts of Jinja the templates use are covered; anything else raises
`Unsupported` when the template is compiled, never while a page renders.

Used when a wheel is built (`render.compile_templates`) and on a source checkout's first run after
a template changed (then cached, see `render`): never on a report's ordinary run.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import jinja2
from jinja2 import nodes
from jinja2.compiler import Frame, find_undeclared, operators
from jinja2.idtracking import VAR_LOAD_ALIAS, VAR_LOAD_PARAMETER, VAR_LOAD_RESOLVE, VAR_LOAD_UNDEFINED
from markupsafe import escape

# The names generated functions use for themselves: a macro parameter (a Python parameter of the
# same name) may not be one.
RESERVED = frozenset({
    "ctx", "blocks", "out", "ex", "env", "rs", "F", "T", "w", "wx", "M", "U", "CU", "Loop", "Markup", "escape", "O",
    "ga", "gi", "markup_join", "parent_template", "fiter",
})
_INTERNAL = re.compile(r"[lt]_\d+")
# Jinja's default globals the pages do not provide (`render` gives `dict` and `range`), and its special names
_NOT_PROVIDED = frozenset({"lipsum", "cycler", "joiner", "namespace", "self", "super", "caller", "varargs", "kwargs"})
_BINARY = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/", "FloorDiv": "//", "Pow": "**", "Mod": "%", "And": "and", "Or": "or"}
_UNARY = {"Pos": "+", "Neg": "-", "Not": "not "}
HEADER = '''"""{name}, compiled by tlparse_py.report.codegen from its Jinja source: do not edit."""
from tlparse_py.report.templating import MISSING as M, Undefined as U, CondUndefined as CU, Loop, Markup, escape, getattr_ as ga, getitem_ as gi, markup_join, output as O

SOURCE = {source!r}  # what it was compiled from (render.source_key): another source is compiled again
'''


class Unsupported(Exception):
    """A template uses a part of Jinja the compiled templates do not cover."""


def parser(filters: Iterable[str], tests: Iterable[str]) -> jinja2.Environment:
    """Jinja, set as the pages are written for (blocks trim their newline...), knowing the names of
    the filters and tests the compiled templates have (`templating`'s and the pages' own)."""
    environment = jinja2.Environment(autoescape=True, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)
    environment.filters = dict.fromkeys(filters)
    environment.tests = dict.fromkeys(tests)  # type: ignore[assignment]
    return environment


def generate(environment: jinja2.Environment, name: str, source: str, key: str) -> str:
    """The Python module of the template `name` (its Jinja `source`); `key` is stored in it as SOURCE."""
    tree = environment.parse(source, name)
    writer = _Statements(environment, name)
    writer.template(tree)
    return HEADER.format(name=name, source=key) + "\n".join(writer.lines) + "\n"


class _Expressions:
    """Expressions: a node → Python source text (what Jinja's compiler writes, on `templating`)."""

    def __init__(self, environment: jinja2.Environment, name: str) -> None:
        self.environment = environment
        self.name = name
        self.lines: list[str] = []
        self.depth = 0
        self.counter = 0
        self.param_defs: list[set[str]] = []
        self.assigns: list[set[str]] = []

    def fail(self, node: nodes.Node, what: str) -> Unsupported:
        return Unsupported(f"{self.name}, line {node.lineno}: {what} is not supported by the compiled templates")

    def temporary(self) -> str:
        self.counter += 1
        return f"t_{self.counter}"

    def expr(self, node: nodes.Node, frame: Frame) -> str:
        kind = type(node).__name__
        if isinstance(node, nodes.BinExpr) and kind in _BINARY:
            return f"({self.expr(node.left, frame)} {_BINARY[kind]} {self.expr(node.right, frame)})"
        if isinstance(node, nodes.UnaryExpr) and kind in _UNARY:
            return f"({_UNARY[kind]}{self.expr(node.node, frame)})"
        method = getattr(self, f"expr_{kind}", None)
        if method is None:
            raise self.fail(node, f"the expression {kind}")
        return str(method(node, frame))

    def expr_Name(self, node: nodes.Name, frame: Frame) -> str:
        if node.ctx == "store" and (frame.toplevel or frame.loop_frame or frame.block_frame) and self.assigns:
            self.assigns[-1].add(node.name)
        ref = frame.symbols.ref(node.name)
        if node.ctx == "load":
            load = frame.symbols.find_load(ref)
            undeclared = bool(self.param_defs) and ref in self.param_defs[-1]
            if not (load is not None and load[0] == VAR_LOAD_PARAMETER and not undeclared):
                return f"(U(name={node.name!r}) if {ref} is M else {ref})"
        return str(ref)

    def expr_Const(self, node: nodes.Const, frame: Frame) -> str:
        value = node.value
        if isinstance(value, float):
            return str(value)
        if value is None or isinstance(value, (str, int, bool)):
            return repr(value)
        raise self.fail(node, f"the constant {value!r}")

    def expr_Tuple(self, node: nodes.Tuple, frame: Frame) -> str:
        items = [self.expr(item, frame) for item in node.items]
        return f"({items[0]},)" if len(items) == 1 else f"({', '.join(items)})"

    def expr_List(self, node: nodes.List, frame: Frame) -> str:
        return f"[{', '.join(self.expr(item, frame) for item in node.items)}]"

    def expr_Dict(self, node: nodes.Dict, frame: Frame) -> str:
        return "{" + ", ".join(f"{self.expr(p.key, frame)}: {self.expr(p.value, frame)}" for p in node.items) + "}"

    def expr_Concat(self, node: nodes.Concat, frame: Frame) -> str:
        return "markup_join((" + "".join(f"{self.expr(arg, frame)}, " for arg in node.nodes) + "))"

    def expr_Compare(self, node: nodes.Compare, frame: Frame) -> str:
        ops = "".join(f" {operators[op.op]} {self.expr(op.expr, frame)}" for op in node.ops)
        return f"({self.expr(node.expr, frame)}{ops})"

    def expr_Getattr(self, node: nodes.Getattr, frame: Frame) -> str:
        return f"ga({self.expr(node.node, frame)}, {node.attr!r})"

    def expr_Getitem(self, node: nodes.Getitem, frame: Frame) -> str:
        if isinstance(node.arg, nodes.Slice):
            return f"{self.expr(node.node, frame)}[{self.expr(node.arg, frame)}]"
        return f"gi({self.expr(node.node, frame)}, {self.expr(node.arg, frame)})"

    def expr_Slice(self, node: nodes.Slice, frame: Frame) -> str:
        text = (self.expr(node.start, frame) if node.start is not None else "") + ":"
        text += self.expr(node.stop, frame) if node.stop is not None else ""
        return text + (":" + self.expr(node.step, frame) if node.step is not None else "")

    def signature(self, node: nodes.Call | nodes.Filter | nodes.Test, frame: Frame) -> str:
        if node.dyn_args is not None or node.dyn_kwargs is not None:
            raise self.fail(node, "a call with *args or **kwargs")
        if any(keyword.iskeyword(str(k.key)) for k in node.kwargs):
            raise self.fail(node, "a keyword argument named as a Python keyword")
        return "".join(f", {self.expr(a, frame)}" for a in node.args) + "".join(f", {k.key}={self.expr(k.value, frame)}" for k in node.kwargs)

    def expr_Filter(self, node: nodes.Filter, frame: Frame) -> str:
        if node.node is None:
            raise self.fail(node, "a filter block")
        if node.name not in self.environment.filters:
            raise self.fail(node, f"the filter {node.name!r}")
        return f"F[{node.name!r}]({self.expr(node.node, frame)}{self.signature(node, frame)})"

    def expr_Test(self, node: nodes.Test, frame: Frame) -> str:
        if node.name not in self.environment.tests:
            raise self.fail(node, f"the test {node.name!r}")
        return f"T[{node.name!r}]({self.expr(node.node, frame)}{self.signature(node, frame)})"

    def expr_CondExpr(self, node: nodes.CondExpr, frame: Frame) -> str:
        frame = frame.soft()
        if node.expr2 is not None:
            otherwise = self.expr(node.expr2, frame)
        else:
            where = f"line {node.lineno} in {self.name!r}"
            otherwise = f'CU("the inline if-expression on {where} evaluated to false and no else section was defined.")'
        return f"({self.expr(node.expr1, frame)} if {self.expr(node.test, frame)} else {otherwise})"

    def expr_Call(self, node: nodes.Call, frame: Frame) -> str:
        return f"{self.expr(node.node, frame)}({self.signature(node, frame)[2:]})"

    # -- writing lines

    def line(self, text: str) -> None:
        self.lines.append("    " * self.depth + text)

    @contextmanager
    def indented(self) -> Iterator[None]:
        self.depth += 1
        self.line("pass")
        try:
            yield
        finally:
            self.depth -= 1

    def enter_frame(self, frame: Frame) -> None:
        undefined = []
        for target, (action, param) in frame.symbols.loads.items():
            if action == VAR_LOAD_RESOLVE:
                if param in _NOT_PROVIDED:
                    raise Unsupported(f"{self.name}: the name {param!r} is not supported by the compiled templates")
                self.line(f"{target} = rs({param!r}, M)")
            elif action == VAR_LOAD_ALIAS:
                self.line(f"{target} = {param}")
            elif action == VAR_LOAD_UNDEFINED:
                undefined.append(target)
            elif action != VAR_LOAD_PARAMETER:
                raise Unsupported(f"{self.name}: unknown load {action!r}")
        if undefined:
            self.line(f"{' = '.join(undefined)} = M")

    def leave_frame(self, frame: Frame, with_python_scope: bool = False) -> None:
        if not with_python_scope and frame.symbols.loads:
            self.line(f"{' = '.join(frame.symbols.loads)} = M")

    def output(self, parts: list[str]) -> None:
        if len(parts) == 1:
            self.line(f"w({parts[0]})")
        elif parts:
            self.line(f"wx(({', '.join(parts)}))")


class _Scoped(_Expressions):
    """Statements that open a scope (loops, macros, with) or branch, and a body of statements."""

    def block(self, body: Iterable[nodes.Node], frame: Frame) -> None:
        for node in body:
            method = getattr(self, f"stmt_{type(node).__name__}", None)
            if method is None:
                raise self.fail(node, f"the statement {type(node).__name__}")
            method(node, frame)

    def stmt_If(self, node: nodes.If, frame: Frame) -> None:
        soft = frame.soft()
        self.line(f"if {self.expr(node.test, soft)}:")
        with self.indented():
            self.block(node.body, soft)
        for elif_ in node.elif_:
            self.line(f"elif {self.expr(elif_.test, soft)}:")
            with self.indented():
                self.block(elif_.body, soft)
        if node.else_:
            self.line("else:")
            with self.indented():
                self.block(node.else_, soft)

    def stmt_With(self, node: nodes.With, frame: Frame) -> None:
        inner = frame.inner()
        inner.symbols.analyze_node(node)
        self.enter_frame(inner)
        for target, value in zip(node.targets, node.values):
            self.line(f"{self.expr(target, inner)} = {self.expr(value, frame)}")
        self.block(node.body, inner)
        self.leave_frame(inner)

    def stmt_Macro(self, node: nodes.Macro, frame: Frame) -> None:
        function = self.macro(node, frame)
        ref = frame.symbols.ref(node.name)
        if frame.toplevel:
            if not node.name.startswith("_"):
                self.line(f"ex.add({node.name!r})")
            self.line(f"ctx[{node.name!r}] = {ref} = {function}")
        else:
            self.line(f"{ref} = {function}")

    def macro(self, node: nodes.Macro, frame: Frame) -> str:
        """The macro as a Python function: its parameters by their template names, its output Markup."""
        frame = frame.inner()
        frame.symbols.analyze_node(node)
        if find_undeclared(node.body, ("caller", "kwargs", "varargs")):
            raise self.fail(node, "a macro using caller, kwargs or varargs")
        names = [arg.name for arg in node.args]
        for name in names:
            if name in RESERVED or keyword.iskeyword(name) or _INTERNAL.match(name):
                raise self.fail(node, f"a macro parameter named {name!r}")
        frame.require_output_check = False
        function = self.temporary()
        self.line(f"def {function}({', '.join(f'{name}=M' for name in names)}):")
        self.depth += 1
        self.line("out = []; w = out.append; wx = out.extend")
        for name in names:
            self.line(f"{frame.symbols.ref(name)} = {name}")
        self.enter_frame(frame)
        self.param_defs.append(frame.symbols.dump_param_targets())
        for index, arg in enumerate(node.args):
            ref = frame.symbols.ref(arg.name)
            self.line(f"if {ref} is M:")
            with self.indented():
                default = index - len(node.args)
                if -default <= len(node.defaults):
                    self.line(f"{ref} = {self.expr(node.defaults[default], frame)}")
                else:
                    self.line(f'{ref} = U("parameter {arg.name!r} was not provided", name={arg.name!r})')
            self.param_defs[-1].discard(ref)
        self.param_defs.pop()
        self.block(node.body, frame)
        self.line('return Markup("".join(out))')
        self.depth -= 1
        return function

    def stmt_For(self, node: nodes.For, frame: Frame) -> None:
        if node.recursive or any(True for _ in node.find_all(nodes.Block)):
            raise self.fail(node, "a recursive loop, or a block in a loop")
        loop_frame = frame.inner()
        loop_frame.loop_frame = True
        test_frame, else_frame = frame.inner(), frame.inner()
        extended = "loop" in find_undeclared(node.iter_child_nodes(only=("body",)), ("loop",))
        loop_ref = loop_frame.symbols.declare_parameter("loop") if extended else None
        loop_frame.symbols.analyze_node(node, for_branch="body")
        if node.else_:
            else_frame.symbols.analyze_node(node, for_branch="else")
        iterable = self.expr(node.iter, frame)
        if node.test is not None:
            test = self.temporary()
            test_frame.symbols.analyze_node(node, for_branch="test")
            self.line(f"def {test}(fiter):")
            self.depth += 1
            self.enter_frame(test_frame)
            target = self.expr(node.target, loop_frame)
            self.line(f"for {target} in fiter:")
            with self.indented():
                self.line(f"if {self.expr(node.test, test_frame)}:")
                with self.indented():
                    self.line(f"yield {target}")
            self.depth -= 1
            iterable = f"{test}({iterable})"
        if loop_ref is not None:
            self.line(f"{loop_ref} = M")
        indicator = self.temporary() if node.else_ else None
        if indicator:
            self.line(f"{indicator} = 1")
        target = self.expr(node.target, loop_frame)
        self.line(f"for {target}, {loop_ref} in Loop({iterable}):" if loop_ref else f"for {target} in {iterable}:")
        with self.indented():
            self.enter_frame(loop_frame)
            self.block(node.body, loop_frame)
            if indicator:
                self.line(f"{indicator} = 0")
        self.leave_frame(loop_frame)
        if indicator:
            self.line(f"if {indicator}:")
            with self.indented():
                self.enter_frame(else_frame)
                self.block(node.else_, else_frame)
                self.leave_frame(else_frame)
        if self.assigns:
            self.assigns[-1].difference_update(loop_frame.symbols.stores)


class _Statements(_Scoped):
    """The template: its root function and blocks, inheritance, imports, includes and output."""

    has_known_extends = False
    extends_so_far = 0

    def commons(self) -> None:
        self.line("rs = ctx.get; F = env.filters; T = env.tests; w = out.append; wx = out.extend")

    def template(self, tree: nodes.Template) -> None:
        eval_ctx = nodes.EvalContext(self.environment, self.name)
        have_extends = tree.find(nodes.Extends) is not None
        blocks: dict[str, nodes.Block] = {}
        for found in tree.find_all(nodes.Block):
            if found.name in blocks:
                raise self.fail(found, f"a second block {found.name!r}")
            if found.scoped or found.required:
                raise self.fail(found, "a scoped or required block")
            blocks[found.name] = found
        if find_undeclared(tree.body, ("self",)):
            raise self.fail(tree, "`self`")
        self.line("")
        self.line("def root(ctx, blocks, out, ex, env):")
        self.depth += 1
        self.commons()
        frame = Frame(eval_ctx)
        frame.symbols.analyze_node(tree)
        frame.toplevel = frame.rootlevel = True
        frame.require_output_check = have_extends
        if have_extends:
            self.line("parent_template = None")
        self.enter_frame(frame)
        self.block(tree.body, frame)
        if have_extends:
            if not self.has_known_extends:
                raise self.fail(tree, "an extends that is not at the top level")
            self.line("parent_template.root(ctx, blocks, out, ex, env)")
        self.depth -= 1
        for name, found in blocks.items():
            self.block_function(name, found, eval_ctx)
        self.line("")
        self.line("BLOCKS = {" + ", ".join(f"{name!r}: block_{name}" for name in blocks) + "}")

    def block_function(self, name: str, node: nodes.Block, eval_ctx: nodes.EvalContext) -> None:
        if find_undeclared(node.body, ("self", "super")):
            raise self.fail(node, "`self` or `super()`")
        self.line("")
        self.line(f"def block_{name}(ctx, blocks, out, env):")
        self.depth += 1
        self.commons()
        frame = Frame(eval_ctx)
        frame.block_frame = True
        frame.symbols.analyze_node(node)
        frame.block = name
        self.enter_frame(frame)
        self.block(node.body, frame)
        self.depth -= 1

    def stmt_Block(self, node: nodes.Block, frame: Frame) -> None:
        if frame.toplevel and self.has_known_extends:
            return
        self.line(f"blocks[{node.name!r}][0](ctx, blocks, out, env)")

    def stmt_Extends(self, node: nodes.Extends, frame: Frame) -> None:
        if not frame.rootlevel or self.extends_so_far or not isinstance(node.template, nodes.Const):
            raise self.fail(node, "an extends other than one, of a named template, at the top level")
        self.line(f"parent_template = env.template({node.template.value!r})")
        self.line("for name, parent_block in parent_template.blocks.items():")
        with self.indented():
            self.line("blocks.setdefault(name, []).append(parent_block)")
        self.has_known_extends = True
        self.extends_so_far += 1

    def stmt_Include(self, node: nodes.Include, frame: Frame) -> None:
        if node.ignore_missing or not node.with_context or not isinstance(node.template, nodes.Const):
            raise self.fail(node, "an include other than of a named template, with its context")
        local = ", ".join(f"{name!r}: {ref}" for name, ref in frame.symbols.dump_stores().items())
        self.line(f"env.include({node.template.value!r}, ctx, {{{local}}}, out)")

    def stmt_Import(self, node: nodes.Import, frame: Frame) -> None:
        if node.with_context or not isinstance(node.template, nodes.Const):
            raise self.fail(node, "an import other than of a named template, without context")
        target = f"ctx[{node.target!r}] = " if frame.toplevel else ""
        self.line(f"{frame.symbols.ref(node.target)} = {target}env.module({node.template.value!r})")
        if frame.toplevel and not node.target.startswith("_"):
            self.line(f"ex.discard({node.target!r})")

    def stmt_Output(self, node: nodes.Output, frame: Frame) -> None:
        if frame.require_output_check and self.has_known_extends:
            return  # after a top-level extends, only the parent's blocks are output
        parts: list[str] = []
        constant: list[str] = []
        for child in node.nodes:
            if isinstance(child, nodes.TemplateData):
                constant.append(child.data)
            elif isinstance(child, nodes.Const) and isinstance(child.value, (str, int, float, bool, type(None))):
                constant.append(str(escape(child.value)))
            else:
                if constant:
                    parts.append(repr("".join(constant)))
                    constant = []
                parts.append(f"O({self.expr(child, frame)})")  # output is only joined: a str, not Markup
        if constant:
            parts.append(repr("".join(constant)))
        self.output(parts)

    def stmt_Assign(self, node: nodes.Assign, frame: Frame) -> None:
        if any(True for _ in node.find_all(nodes.NSRef)):
            raise self.fail(node, "a namespace assignment")
        self.assigns.append(set())
        self.line(f"{self.expr(node.target, frame)} = {self.expr(node.node, frame)}")
        names = self.assigns.pop()
        if names and frame.toplevel and not frame.block_frame and not frame.loop_frame:
            for name in sorted(names):
                self.line(f"ctx[{name!r}] = {frame.symbols.ref(name)}")
            for name in sorted(n for n in names if not n.startswith("_")):
                self.line(f"ex.add({name!r})")
