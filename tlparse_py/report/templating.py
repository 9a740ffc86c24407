"""What the page templates run on once compiled: no Jinja at run time.

`codegen` turns each Jinja template into a Python module (when a wheel is built, or on a source
checkout's first run: see `render`); those modules call only the helpers here and markupsafe.
Importing Jinja, its lexer, parser and compiler, was a tenth of a small report's run.

The helpers answer exactly as Jinja's runtime does in the environment `render` used (autoescape on,
`StrictUndefined`, `x.name` on a dict found as its key): lookups, undefined values, loops,
`~`, and the filters and tests the templates use. `codegen` refuses a template that needs anything
else, so a template edit can never change a page silently. Parts of this follow Jinja's own runtime
and filters (BSD-3-Clause, Copyright 2007 Pallets).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from itertools import chain
from typing import Any

from markupsafe import Markup, escape

__all__ = [
    "MISSING", "CondUndefined", "Loop", "Markup", "Module", "Template", "Templates", "Undefined", "UndefinedError",
    "escape", "getattr_", "getitem_", "markup_join", "output", "str_join",
]


class _Missing:
    __slots__ = ()

    def __repr__(self) -> str:
        return "missing"

    def __reduce__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # a variable not set (yet): read, it becomes an Undefined


class UndefinedError(Exception):
    """A template used a value that is not defined (Jinja's `UndefinedError`)."""


def _type_repr(obj: Any) -> str:
    if obj is None:
        return "None"
    if obj is Ellipsis:
        return "Ellipsis"
    cls = type(obj)
    return cls.__name__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__name__}"


class Undefined:
    """An undefined value, as Jinja's `StrictUndefined`: using it in any way but `is defined` fails."""

    __slots__ = ("_hint", "_obj", "_name")

    def __init__(self, hint: str | None = None, obj: Any = MISSING, name: Any = None) -> None:
        self._hint = hint
        self._obj = obj
        self._name = name

    @property
    def _message(self) -> str:
        if self._hint:
            return self._hint
        if self._obj is MISSING:
            return f"{self._name!r} is undefined"
        if not isinstance(self._name, str):
            return f"{_type_repr(self._obj)} has no element {self._name!r}"
        return f"{_type_repr(self._obj)!r} has no attribute {self._name!r}"

    def _fail(self, *args: Any, **kwargs: Any) -> Any:
        raise UndefinedError(self._message)

    def __getattr__(self, name: str) -> Any:
        if name[:2] == "__" and name[-2:] == "__":
            raise AttributeError(name)
        return self._fail()

    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _fail
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = __mod__ = __rmod__ = _fail
    __pos__ = __neg__ = __call__ = __getitem__ = __contains__ = _fail
    __lt__ = __le__ = __gt__ = __ge__ = __int__ = __float__ = __complex__ = __pow__ = __rpow__ = _fail
    __iter__ = __str__ = __len__ = __eq__ = __ne__ = __bool__ = __hash__ = _fail

    def __repr__(self) -> str:
        return "Undefined"


class CondUndefined(Undefined):
    """`a if b` with no else, when b is false: prints as nothing (Jinja's plain `Undefined`)."""

    __slots__ = ()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other)

    def __ne__(self, other: object) -> bool:
        return not self.__eq__(other)

    def __hash__(self) -> int:
        return id(type(self))

    def __str__(self) -> str:
        return ""

    def __len__(self) -> int:
        return 0

    def __iter__(self) -> Iterator[Any]:
        yield from ()

    def __bool__(self) -> bool:
        return False


_DICT_ATTRIBUTES = frozenset(dir(dict))


def getattr_(obj: Any, attribute: str) -> Any:
    """`obj.attribute` in a template: the attribute, else the item, else undefined. On a dict, the
    key first (what it nearly always is; a dict's own attributes still win), which spares a raised
    and caught AttributeError per lookup."""
    if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
        try:
            return obj[attribute]
        except KeyError:
            pass
    try:
        return getattr(obj, attribute)
    except AttributeError:
        pass
    try:
        return obj[attribute]
    except (TypeError, LookupError, AttributeError):
        return Undefined(obj=obj, name=attribute)


def getitem_(obj: Any, argument: Any) -> Any:
    """`obj[argument]` in a template: the item, else (for a string) the attribute, else undefined."""
    try:
        return obj[argument]
    except (AttributeError, TypeError, LookupError):
        if isinstance(argument, str):
            try:
                return getattr(obj, argument)
            except AttributeError:
                pass
        return Undefined(obj=obj, name=argument)


def _soft_str(value: Any) -> str:
    return value if isinstance(value, str) else str(value)


def output(value: Any) -> str:
    """`{{ value }}`: its text, escaped as markupsafe's `escape` escapes it, as a plain str. A page's
    output is only ever joined, so the Markup `escape` wraps it in is not needed, and a report of
    a big log writes 100,000s of values (a text is escaped by str.replace in C; any other value,
    Markup included, by `escape` itself)."""
    if type(value) is str:
        return value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace("'", "&#39;").replace('"', "&#34;")
    if type(value) is int:
        return str(value)
    if type(value) is Markup:  # already safe: as it is (escape() and str() would each copy it, and
        return value  # a live index's rows are megabytes)
    return str(escape(value))


def markup_join(seq: Iterable[Any]) -> str:
    """`a ~ b`: the texts joined, escaped as Markup as soon as one of them is."""
    buf = []
    iterator = map(_soft_str, seq)
    for arg in iterator:
        buf.append(arg)
        if hasattr(arg, "__html__"):
            return Markup("").join(chain(buf, iterator))
    return "".join(buf)


def str_join(seq: Iterable[Any]) -> str:
    return "".join(map(str, seq))


class Loop:
    """The `loop` variable of a `{% for %}` (Jinja's `LoopContext`): iterated, it yields (item, loop)."""

    index0 = -1
    depth0 = 0
    _length: int | None = None
    _after: Any = MISSING
    _current: Any = MISSING
    _before: Any = MISSING
    _last_changed_value: Any = MISSING

    def __init__(self, iterable: Iterable[Any]) -> None:
        self._iterable = iterable
        self._iterator = iter(iterable)

    @property
    def length(self) -> int:
        if self._length is not None:
            return self._length
        try:
            self._length = len(self._iterable)  # type: ignore[arg-type]
        except TypeError:
            rest = list(self._iterator)
            self._iterator = iter(rest)
            self._length = len(rest) + self.index + (self._after is not MISSING)
        return self._length

    def __len__(self) -> int:
        return self.length

    @property
    def depth(self) -> int:
        return self.depth0 + 1

    @property
    def index(self) -> int:
        return self.index0 + 1

    @property
    def revindex0(self) -> int:
        return self.length - self.index

    @property
    def revindex(self) -> int:
        return self.length - self.index0

    @property
    def first(self) -> bool:
        return self.index0 == 0

    def _peek_next(self) -> Any:
        if self._after is not MISSING:
            return self._after
        self._after = next(self._iterator, MISSING)
        return self._after

    @property
    def last(self) -> bool:
        return self._peek_next() is MISSING

    @property
    def previtem(self) -> Any:
        return Undefined("there is no previous item") if self.first else self._before

    @property
    def nextitem(self) -> Any:
        after = self._peek_next()
        return Undefined("there is no next item") if after is MISSING else after

    def cycle(self, *args: Any) -> Any:
        if not args:
            raise TypeError("no items for cycling given")
        return args[self.index0 % len(args)]

    def changed(self, *value: Any) -> bool:
        if self._last_changed_value != value:
            self._last_changed_value = value
            return True
        return False

    def __iter__(self) -> Loop:
        return self

    def __next__(self) -> tuple[Any, Loop]:
        if self._after is not MISSING:
            item = self._after
            self._after = MISSING
        else:
            item = next(self._iterator)
        self.index0 += 1
        self._before = self._current
        self._current = item
        return item, self

    def __repr__(self) -> str:
        return f"<Loop {self.index}/{self.length}>"


class Template:
    """A compiled template: its root function and its blocks."""

    __slots__ = ("name", "root", "blocks")

    def __init__(self, name: str, namespace: dict[str, Any]) -> None:
        self.name = name
        self.root: Callable[..., None] = namespace["root"]
        self.blocks: dict[str, Callable[..., None]] = namespace["BLOCKS"]


class Module:
    """A template imported with `{% import ... as m %}`: its macros and top-level variables."""

    def __init__(self, name: str, exported: dict[str, Any], body: str) -> None:
        self.__dict__.update(exported)
        self.__name__ = name
        self._body = body

    def __str__(self) -> str:
        return self._body

    def __repr__(self) -> str:
        return f"<Module {self.__name__!r}>"


class Templates:
    """The compiled templates of one template folder, each loaded when first used (`load`: the
    namespace of its compiled module), with the pages' globals and filters: Jinja's environment,
    without Jinja."""

    def __init__(self, load: Callable[[str], dict[str, Any]], globals: dict[str, Any], filters: dict[str, Callable[..., Any]]) -> None:
        self._load = load
        self.globals = globals
        FILTERS.update(filters)  # `map` finds a filter by its name among them all, as Jinja's does
        self.filters = FILTERS
        self.tests = TESTS
        self._templates: dict[str, Template] = {}
        self._modules: dict[str, Module] = {}

    def template(self, name: str) -> Template:
        found = self._templates.get(name)
        if found is None:
            found = self._templates[name] = Template(name, self._load(name))
        return found

    def render(self, name: str, context: dict[str, Any]) -> str:
        template = self.template(name)
        out: list[str] = []
        template.root({**self.globals, **context}, _blocks(template), out, set(), self)
        return "".join(out)

    def include(self, name: str, context: dict[str, Any], local: dict[str, Any], out: list[str]) -> None:
        """`{% include %}`: the template rendered with this one's variables, the local ones included."""
        template = self.template(name)
        values = dict(context)
        values.update((key, value) for key, value in local.items() if value is not MISSING)
        template.root(values, _blocks(template), out, set(), self)

    def module(self, name: str) -> Module:
        """`{% import name as m %}` (without context): the module, made once."""
        found = self._modules.get(name)
        if found is None:
            template = self.template(name)
            context = dict(self.globals)
            out: list[str] = []
            exported: set[str] = set()
            template.root(context, _blocks(template), out, exported, self)
            found = self._modules[name] = Module(name, {key: context[key] for key in exported}, "".join(out))
        return found


def _blocks(template: Template) -> dict[str, list[Callable[..., None]]]:
    """A render's blocks: each name's implementations, the most derived template's first."""
    return {name: [block] for name, block in template.blocks.items()}


# -- the filters and tests the templates may use (Jinja's, in an autoescaping environment)

def _attribute_parts(attribute: Any) -> list[Any]:
    if attribute is None:
        return []
    if isinstance(attribute, str):
        return [int(x) if x.isdigit() else x for x in attribute.split(".")]
    return [attribute]


def _attrgetter(attribute: Any, postprocess: Callable[[Any], Any] | None = None, default: Any = None) -> Callable[[Any], Any]:
    parts = _attribute_parts(attribute)

    def get(item: Any) -> Any:
        for part in parts:
            item = getitem_(item, part)
            if default is not None and isinstance(item, Undefined):
                item = default
        return postprocess(item) if postprocess is not None else item

    return get


def _ignore_case(value: Any) -> Any:
    return value.lower() if isinstance(value, str) else value


def do_join(value: Iterable[Any], d: str = "", attribute: Any = None) -> str:
    if attribute is not None:
        value = map(_attrgetter(attribute), value)
    if not hasattr(d, "__html__"):
        items = list(value)
        do_escape = False
        for idx, item in enumerate(items):
            if hasattr(item, "__html__"):
                do_escape = True
            else:
                items[idx] = str(item)
        return (escape(d) if do_escape else str(d)).join(items)
    return _soft_str(d).join(map(_soft_str, value))


def do_sum(iterable: Iterable[Any], attribute: Any = None, start: Any = 0) -> Any:
    if attribute is not None:
        iterable = map(_attrgetter(attribute), iterable)
    return sum(iterable, start)


def do_min(value: Iterable[Any], case_sensitive: bool = False, attribute: Any = None) -> Any:
    return _min_or_max(value, min, case_sensitive, attribute)


def do_max(value: Iterable[Any], case_sensitive: bool = False, attribute: Any = None) -> Any:
    return _min_or_max(value, max, case_sensitive, attribute)


def _min_or_max(value: Iterable[Any], func: Callable[..., Any], case_sensitive: bool, attribute: Any) -> Any:
    it = iter(value)
    try:
        first = next(it)
    except StopIteration:
        return Undefined("No aggregated item, sequence was empty.")
    key = _attrgetter(attribute, postprocess=None if case_sensitive else _ignore_case)
    return func(chain([first], it), key=key)


def do_format(value: str, *args: Any, **kwargs: Any) -> str:
    if args and kwargs:
        raise TypeError("can't handle positional and keyword arguments at the same time")
    return _soft_str(value) % (kwargs or args)


def do_first(seq: Iterable[Any]) -> Any:
    try:
        return next(iter(seq))
    except StopIteration:
        return Undefined("No first item, sequence was empty.")


def do_last(seq: Any) -> Any:
    try:
        return next(iter(reversed(seq)))
    except StopIteration:
        return Undefined("No last item, sequence was empty.")


def do_list(value: Iterable[Any]) -> list[Any]:
    return list(value)


def _select(value: Iterable[Any], args: tuple[Any, ...], kwargs: dict[str, Any], keep: bool, attribute: bool) -> Iterator[Any]:
    """select / reject / selectattr / rejectattr: the items whose test (of the item, or of its
    attribute) is `keep`; with no test named, the value's truth."""
    if attribute:
        get = _attrgetter(args[0])
        args = args[1:]
    else:
        def get(x: Any) -> Any:
            return x

    check: Callable[[Any], Any] = bool
    if args:
        test, rest = TESTS[args[0]], args[1:]

        def check(item: Any) -> Any:
            return test(item, *rest, **kwargs)
    if value:
        for item in value:
            if bool(check(get(item))) is keep:
                yield item


def do_select(value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    return _select(value, args, kwargs, True, False)


def do_reject(value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    return _select(value, args, kwargs, False, False)


def do_selectattr(value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    return _select(value, args, kwargs, True, True)


def do_rejectattr(value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    return _select(value, args, kwargs, False, True)


def do_map(value: Iterable[Any], *args: Any, **kwargs: Any) -> Iterator[Any]:
    if not args and "attribute" in kwargs:
        attribute = kwargs.pop("attribute")
        default = kwargs.pop("default", None)
        if kwargs:
            raise TypeError(f"Unexpected keyword argument {next(iter(kwargs))!r}")
        func: Callable[[Any], Any] = _attrgetter(attribute, default=default)
    else:
        name, rest = args[0], args[1:]
        found = FILTERS[name]

        def func(item: Any) -> Any:
            return found(item, *rest, **kwargs)
    if value:
        for item in value:
            yield func(item)


def _test_iterable(value: Any) -> bool:
    try:
        iter(value)
    except TypeError:
        return False
    return True


FILTERS: dict[str, Callable[..., Any]] = {
    "length": len, "count": len, "join": do_join, "sum": do_sum, "min": do_min, "max": do_max,
    "format": do_format, "first": do_first, "last": do_last, "list": do_list, "map": do_map,
    "select": do_select, "reject": do_reject, "selectattr": do_selectattr, "rejectattr": do_rejectattr,
}
TESTS: dict[str, Callable[..., bool]] = {
    "defined": lambda value: not isinstance(value, Undefined),
    "undefined": lambda value: isinstance(value, Undefined),
    "none": lambda value: value is None,
    "string": lambda value: isinstance(value, str),
    "iterable": _test_iterable,
    "sameas": lambda value, other: value is other,
}
