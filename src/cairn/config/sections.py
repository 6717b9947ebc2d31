"""Settings sections: declared fields, strict validation and errors, without pydantic.

:mod:`cairn.config.settings` declares its sections as classes with annotated fields, as a
pydantic model is declared (``enabled: bool = Field(True, description=...)``), and reads them
with the same strict rules a pydantic model with ``strict=True``, ``extra="allow"``,
``validate_assignment=True`` and camelCase aliases applied: a ``bool`` is ``true`` or
``false``, an ``int`` no float and no bool, a ``float`` any number but a bool, a ``str`` a
string, a list a JSON list, a section a JSON object; unknown keys are kept aside
(:attr:`Section.model_extra`). A failure raises :class:`ValidationError`, whose
:meth:`~ValidationError.errors` have pydantic's shape (``type``, ``loc`` with a union's branch
names, ``msg``, ``input``), so :func:`cairn.config.loader.describe_validation_error` words them.

Pydantic cost every start-up about a third of its instructions (importing it, building the
models and their validators: benchmarks/README.md); the settings are read on every start, and
the few shapes they use need no more than this module. The readings are pinned against what the
pydantic models made of 2,359 settings files (``tests/config/test_sections.py``).
"""

from __future__ import annotations

import copy
import re
import types
import typing
from collections.abc import Callable, Iterator, Mapping
from typing import Any, ClassVar, Literal, Self, TypedDict

__all__ = [
    "MISSING",
    "ErrorDetails",
    "Field",
    "FieldInfo",
    "InvalidSetting",
    "Section",
    "ValidationError",
    "field_validator",
    "model_validator",
    "to_camel",
]


class _Missing:
    def __repr__(self) -> str:
        return "MISSING"


MISSING: Any = _Missing()  # a field without a default: the input must name it
_INVALID: Any = object()  # what a failed validation returns (its errors say why)

Loc = tuple[str | int, ...]


class ErrorDetails(TypedDict):
    """One problem, shaped as pydantic reports it."""

    type: str
    loc: Loc
    msg: str
    input: Any


class ValidationError(ValueError):
    """Input a section cannot hold; :meth:`errors` lists every problem."""

    def __init__(self, title: str, errors: list[ErrorDetails]) -> None:
        self.title = title
        self._errors = errors
        lines = [f"{len(errors)} validation error(s) for {title}"]
        for error in errors:
            where = ".".join(str(part) for part in error["loc"]) or "(top level)"
            lines.append(f"{where}\n  {error['msg']} [type={error['type']}]")
        super().__init__("\n".join(lines))

    def errors(self) -> list[ErrorDetails]:
        return list(self._errors)

    def error_count(self) -> int:
        return len(self._errors)


class InvalidSetting(ValueError):
    """Raised by a section's own check: ``kind`` is the error's type, ``message`` its text
    (what the value must be: "a stdio server with a `command`")."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


_CAMEL_ALREADY = re.compile("^[a-z]+[A-Za-z0-9]*$")
_DIGIT_LOWER = re.compile(r"\d[a-z]")
_JOIN = re.compile("([0-9A-Za-z])_(?=[0-9A-Z])")
_FIRST = re.compile("(^_*[A-Z])")


def to_camel(snake: str) -> str:
    """``max_file_size_mb`` → ``maxFileSizeMb``: pydantic's ``to_camel``, step for step."""
    if _CAMEL_ALREADY.match(snake) and not _DIGIT_LOWER.search(snake):
        return snake
    pascal = _JOIN.sub(lambda m: m.group(1), snake.title())
    return _FIRST.sub(lambda m: m.group(1).lower(), pascal)


class FieldInfo:
    """A field's declaration: its type, default, key in files and documentation."""

    __slots__ = (
        "alias",
        "annotation",
        "default",
        "default_factory",
        "description",
        "ge",
        "gt",
        "json_schema_extra",
        "le",
    )

    def __init__(
        self,
        default: Any = MISSING,
        *,
        default_factory: Callable[[], Any] | None = None,
        alias: str | None = None,
        description: str | None = None,
        json_schema_extra: dict[str, Any] | None = None,
        gt: float | None = None,
        ge: float | None = None,
        le: float | None = None,
    ) -> None:
        self.default = default
        self.default_factory = default_factory
        self.alias = alias
        self.description = description
        self.json_schema_extra = json_schema_extra
        self.gt, self.ge, self.le = gt, ge, le
        self.annotation: Any = None

    def is_required(self) -> bool:
        return self.default is MISSING and self.default_factory is None

    def get_default(self, *, call_default_factory: bool = False) -> Any:
        if self.default_factory is not None:
            return self.default_factory() if call_default_factory else None
        return None if self.default is MISSING else self.default

    def make_default(self) -> Any:
        """The default a section without this key holds (a fresh one from a factory)."""
        if self.default_factory is not None:
            return self.default_factory()
        return self.default

    def __repr__(self) -> str:
        return f"FieldInfo(annotation={self.annotation!r}, alias={self.alias!r})"


def Field(default: Any = MISSING, **declared: Any) -> Any:
    """A field's declaration in a :class:`Section` body (:class:`FieldInfo`'s arguments); typed
    ``Any`` so that ``enabled: bool = Field(True)`` type-checks."""
    return FieldInfo(default, **declared)


def field_validator(name: str, *, mode: Literal["before"] = "before") -> Callable[[Any], Any]:
    """A classmethod that turns the raw value of field ``name`` into what the field validates
    (a ``ValueError`` it raises is the field's ``value_error``)."""

    def mark(method: Any) -> Any:
        method.__cairn_before__ = name
        return method

    return mark


def model_validator(*, mode: Literal["after"] = "after") -> Callable[[Any], Any]:
    """A method checking a section once its fields are valid; it raises
    :class:`InvalidSetting` (or ``ValueError``) for a section that cannot be used."""

    def mark(method: Any) -> Any:
        method.__cairn_after__ = True
        return method

    return mark


class _Context:
    __slots__ = ("by_name",)

    def __init__(self, by_name: bool) -> None:
        self.by_name = by_name


Validator = Callable[[Any, Loc, list[ErrorDetails], _Context], Any]


class Section:
    """A group of settings (see the module docstring for how one reads its input).

    ``Section(**values)`` and :meth:`model_validate` validate; :meth:`model_construct`,
    :meth:`from_valid` and :meth:`defaults` trust what they are given.
    """

    __slots__ = ("__dict__", "model_extra", "model_fields_set")
    model_fields: ClassVar[dict[str, FieldInfo]] = {}
    _aliases: ClassVar[dict[str, str]] = {}  # key in files -> field name
    _before: ClassVar[dict[str, Callable[[Any], Any]]] = {}
    _after: ClassVar[tuple[Callable[[Any], Any], ...]] = ()
    _checks: ClassVar[dict[str, Validator]] = {}  # field name -> its validator, made on use

    model_extra: dict[str, Any]
    model_fields_set: set[str]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        fields: dict[str, FieldInfo] = {}
        for base in reversed(cls.__mro__[1:]):
            fields.update(getattr(base, "model_fields", {}))
        before = dict(getattr(cls, "_before", {}))
        after = list(getattr(cls, "_after", ()))
        own = cls.__dict__.get("__annotations__", {})  # noqa: RUF063 - inspect: ~7 M to import
        if any(isinstance(annotation, str) for annotation in own.values()):
            hints = typing.get_type_hints(cls)  # postponed annotations: evaluated once here
            own = {name: hints[name] for name in own}
        for name, annotation in own.items():
            if typing.get_origin(annotation) is ClassVar or name.startswith("_"):
                continue
            declared = cls.__dict__.get(name, MISSING)
            info = declared if isinstance(declared, FieldInfo) else FieldInfo(declared)
            info.annotation = annotation
            if info.alias is None:
                info.alias = to_camel(name)
            fields[name] = info
            if name in cls.__dict__:
                delattr(cls, name)  # the instance holds the value
        for attribute in list(cls.__dict__.values()):
            if hasattr(attribute, "__cairn_before__"):  # a classmethod
                before[attribute.__cairn_before__] = attribute.__get__(None, cls)
            if getattr(attribute, "__cairn_after__", False):
                after.append(attribute)
        cls.model_fields = fields
        cls._aliases = {info.alias or name: name for name, info in fields.items()}
        cls._before = before
        cls._after = tuple(after)
        cls._checks = {}

    # ----- making one -----

    def __init__(self, **data: Any) -> None:
        made = type(self)._validated(data, (), _Context(by_name=True))
        self._take(made)

    def _take(self, other: Section) -> None:
        object.__setattr__(self, "__dict__", other.__dict__)
        object.__setattr__(self, "model_extra", other.model_extra)
        object.__setattr__(self, "model_fields_set", other.model_fields_set)

    @classmethod
    def model_validate(cls, obj: Any, *, by_name: bool | None = None) -> Self:
        """``obj`` (a mapping, or a ``cls`` already) read as ``cls``; ``by_name=False`` reads
        each field by its key in files only (its Python name is then an unknown key)."""
        errors: list[ErrorDetails] = []
        made = _validate_section(cls, obj, (), errors, _Context(by_name is not False))
        if errors:
            raise ValidationError(cls.__name__, errors)
        return made

    @classmethod
    def _validated(cls, data: Mapping[str, Any], loc: Loc, context: _Context) -> Self:
        errors: list[ErrorDetails] = []
        made = _read_mapping(cls, data, loc, errors, context)
        if errors:
            raise ValidationError(cls.__name__, errors)
        return made

    @classmethod
    def model_construct(cls, _fields_set: set[str] | None = None, **values: Any) -> Self:
        """``cls`` holding ``values`` (by key or name) without validation; other fields get
        their defaults, other keys are kept aside."""
        section = cls.__new__(cls)
        given = dict(values)
        found: dict[str, Any] = {}
        for name, info in cls.model_fields.items():
            key = info.alias or name
            if key in given:
                found[name] = given.pop(key)
            elif name in given:
                found[name] = given.pop(name)
        state = {
            name: found[name] if name in found else info.make_default()
            for name, info in cls.model_fields.items()
        }
        fields_set = set(found) | set(given) if _fields_set is None else set(_fields_set)
        _init(section, state, given, fields_set)
        return section

    @classmethod
    def from_valid(cls, values: Mapping[str, Any], fields_set: set[str]) -> Self:
        """``cls`` holding ``values`` (valid already; by field name or key) and the other
        fields' defaults, without validation."""
        return cls.model_construct(set(fields_set), **values)

    @classmethod
    def defaults(cls) -> Self:
        """The defaults, as ``cls()`` makes them."""
        return cls.model_construct(set())

    # ----- reading and changing one -----

    def __getattr__(self, name: str) -> Any:
        if not name.startswith("__"):
            extra = self.__getstate_extra()
            if extra is not None and name in extra:
                return extra[name]
        raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")

    def __getstate_extra(self) -> dict[str, Any] | None:
        try:
            return object.__getattribute__(self, "model_extra")
        except AttributeError:
            return None

    def __setattr__(self, name: str, value: Any) -> None:
        info = type(self).model_fields.get(name)
        if info is None:
            if name.startswith("_"):
                raise AttributeError(f"{type(self).__name__!r} has no attribute {name!r}")
            self.model_extra[name] = value
            self.model_fields_set.add(name)
            return
        errors: list[ErrorDetails] = []
        checked = _check_field(type(self), name, info, value, (name,), errors, _Context(True))
        if errors:
            raise ValidationError(type(self).__name__, errors)
        self.__dict__[name] = checked
        self.model_fields_set.add(name)

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        assert isinstance(other, Section)
        return self.__dict__ == other.__dict__ and self.model_extra == other.model_extra

    __hash__ = None  # type: ignore[assignment]  # mutable, as pydantic's models are

    def __repr__(self) -> str:
        parts = [f"{name}={value!r}" for name, value in self.__dict__.items()]
        parts += [f"{name}={value!r}" for name, value in self.model_extra.items()]
        return f"{type(self).__name__}({', '.join(parts)})"

    def __iter__(self) -> Iterator[tuple[str, Any]]:
        yield from self.__dict__.items()
        yield from self.model_extra.items()

    def __copy__(self) -> Self:
        return self.model_copy()

    def __deepcopy__(self, memo: dict[int, Any]) -> Self:
        made = type(self).__new__(type(self))
        memo[id(self)] = made
        _init(
            made,
            copy.deepcopy(self.__dict__, memo),
            copy.deepcopy(self.model_extra, memo),
            set(self.model_fields_set),
        )
        return made

    def __getstate__(self) -> dict[str, Any]:
        return {
            "fields": self.__dict__,
            "extra": self.model_extra,
            "set": self.model_fields_set,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        _init(self, state["fields"], state["extra"], state["set"])

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy (``deep``: nested sections and lists copied too), ``update`` applied
        without validation."""
        made = copy.deepcopy(self) if deep else type(self).__new__(type(self))
        if not deep:
            _init(made, dict(self.__dict__), dict(self.model_extra), set(self.model_fields_set))
        for name, value in (update or {}).items():
            if name in type(self).model_fields:
                made.__dict__[name] = value
            else:
                made.model_extra[name] = value
            made.model_fields_set.add(name)
        return made

    def model_dump(
        self,
        *,
        by_alias: bool = False,
        exclude_unset: bool = False,
        exclude_none: bool = False,
        mode: str = "python",
    ) -> dict[str, Any]:
        """The section as plain values (nested sections as dicts, unknown keys last)."""
        out: dict[str, Any] = {}
        for name, info in type(self).model_fields.items():
            if exclude_unset and name not in self.model_fields_set:
                continue
            value = self.__dict__[name]
            if exclude_none and value is None:
                continue
            key = (info.alias or name) if by_alias else name
            out[key] = _dump(value, by_alias, exclude_unset, exclude_none)
        for key, value in self.model_extra.items():
            if exclude_none and value is None:
                continue
            out[key] = _dump(value, by_alias, exclude_unset, exclude_none)
        return out


def _init(
    section: Section, state: dict[str, Any], extra: dict[str, Any], fields_set: set[str]
) -> None:
    object.__setattr__(section, "__dict__", state)
    object.__setattr__(section, "model_extra", extra)
    object.__setattr__(section, "model_fields_set", fields_set)


def _dump(value: Any, by_alias: bool, exclude_unset: bool, exclude_none: bool) -> Any:
    if isinstance(value, Section):
        return value.model_dump(
            by_alias=by_alias, exclude_unset=exclude_unset, exclude_none=exclude_none
        )
    if isinstance(value, list):
        return [_dump(item, by_alias, exclude_unset, exclude_none) for item in value]
    if isinstance(value, dict):
        return {k: _dump(v, by_alias, exclude_unset, exclude_none) for k, v in value.items()}
    return value


# ----- validation -----


def _error(errors: list[ErrorDetails], kind: str, loc: Loc, msg: str, value: Any) -> Any:
    errors.append({"type": kind, "loc": loc, "msg": msg, "input": value})
    return _INVALID


def _validate_section(
    cls: type[Section], value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context
) -> Any:
    if isinstance(value, cls):
        return value  # a section already made is taken as it is
    if not isinstance(value, dict):
        message = f"Input should be a valid dictionary or instance of {cls.__name__}"
        return _error(errors, "model_type", loc, message, value)
    return _read_mapping(cls, value, loc, errors, context)


def _read_mapping(
    cls: type[Section],
    data: Mapping[str, Any],
    loc: Loc,
    errors: list[ErrorDetails],
    context: _Context,
) -> Any:
    found_errors = len(errors)
    rest = dict(data)
    state: dict[str, Any] = {}
    fields_set: set[str] = set()
    for name, info in cls.model_fields.items():
        key = info.alias or name
        if key in rest:
            value = rest.pop(key)
            if context.by_name:
                rest.pop(name, None)
        elif context.by_name and name in rest:
            value = rest.pop(name)
        else:
            if info.is_required():
                _error(errors, "missing", (*loc, key), "Field required", data)
            else:
                state[name] = info.make_default()
            continue
        fields_set.add(name)
        state[name] = _check_field(cls, name, info, value, (*loc, key), errors, context)
    if len(errors) > found_errors:
        return _INVALID
    section = cls.__new__(cls)
    fields_set |= set(rest)
    _init(section, state, rest, fields_set)
    for check in cls._after:
        try:
            check(section)
        except InvalidSetting as exc:
            return _error(errors, exc.kind, loc, exc.message, data)
        except ValueError as exc:
            return _error(errors, "value_error", loc, f"Value error, {exc}", data)
    return section


def _check_field(
    cls: type[Section],
    name: str,
    info: FieldInfo,
    value: Any,
    loc: Loc,
    errors: list[ErrorDetails],
    context: _Context,
) -> Any:
    before = cls._before.get(name)
    if before is not None:
        try:
            value = before(value)
        except ValueError as exc:
            return _error(errors, "value_error", loc, f"Value error, {exc}", value)
    check = cls._checks.get(name)
    if check is None:
        check = cls._checks[name] = _validator(info.annotation, info)
    return check(value, loc, errors, context)


def _validator(annotation: Any, info: FieldInfo | None = None) -> Validator:
    """The validator of values of type ``annotation`` (with ``info``'s bounds)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        members = [a for a in args if a is not type(None)]
        nullable = len(members) < len(args)
        inner = (
            _validator(members[0], info)
            if len(members) == 1
            else _union([(_tag(m), _validator(m, info)) for m in members])
        )
        return _nullable(inner) if nullable else inner
    if origin is Literal:
        return _literal(args)
    if origin is list:
        return _list(_validator(args[0]))
    if origin is dict:
        return _dict(_validator(args[1]))
    if isinstance(annotation, type) and issubclass(annotation, Section):
        section = annotation
        return lambda value, loc, errors, context: _validate_section(
            section, value, loc, errors, context
        )
    if annotation is Any:
        return lambda value, loc, errors, context: value
    if annotation in _SCALARS:
        check = _SCALARS[annotation]
        if info is not None and (info.gt is not None or info.ge is not None or info.le is not None):
            return _bounded(check, info)
        return check
    raise TypeError(f"settings cannot hold values of type {annotation!r}")


def _tag(annotation: Any) -> str:
    """A union branch's name in an error's ``loc``, as pydantic names it."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is Literal:
        return f"literal[{', '.join(repr(a) for a in args)}]"
    if origin is list:
        return f"list[{_tag(args[0])}]"
    if origin is dict:
        return f"dict[{_tag(args[0])},{_tag(args[1])}]"
    if origin in (typing.Union, types.UnionType):
        return f"union[{','.join(_tag(a) for a in args)}]"
    return getattr(annotation, "__name__", repr(annotation))


def _bool(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
    if isinstance(value, bool):
        return value
    return _error(errors, "bool_type", loc, "Input should be a valid boolean", value)


def _int(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    return _error(errors, "int_type", loc, "Input should be a valid integer", value)


def _float(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
    if isinstance(value, float):
        return value
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return _error(errors, "float_type", loc, "Input should be a valid number", value)


def _str(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
    if isinstance(value, str):
        return value
    return _error(errors, "string_type", loc, "Input should be a valid string", value)


_SCALARS: dict[Any, Validator] = {bool: _bool, int: _int, float: _float, str: _str}


def _bounded(check: Validator, info: FieldInfo) -> Validator:
    def validate(given: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        value = check(given, loc, errors, context)
        if value is _INVALID:
            return value
        value, checked = given, value  # an error names the input as given (-1, not -1.0)
        if info.gt is not None and not value > info.gt:
            return _error(
                errors, "greater_than", loc, f"Input should be greater than {info.gt}", value
            )
        if info.ge is not None and not value >= info.ge:
            message = f"Input should be greater than or equal to {info.ge}"
            return _error(errors, "greater_than_equal", loc, message, value)
        if info.le is not None and not value <= info.le:
            message = f"Input should be less than or equal to {info.le}"
            return _error(errors, "less_than_equal", loc, message, value)
        return checked

    return validate


def _nullable(inner: Validator) -> Validator:
    def validate(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        return None if value is None else inner(value, loc, errors, context)

    return validate


def _union(branches: list[tuple[str, Validator]]) -> Validator:
    def validate(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        failed: list[ErrorDetails] = []
        for tag, check in branches:
            mine: list[ErrorDetails] = []
            result = check(value, (*loc, tag), mine, context)
            if not mine:
                return result
            failed += mine
        errors.extend(failed)
        return _INVALID

    return validate


def _literal(choices: tuple[Any, ...]) -> Validator:
    shown = [repr(choice) for choice in choices]
    expected = shown[0] if len(shown) == 1 else f"{', '.join(shown[:-1])} or {shown[-1]}"
    message = f"Input should be {expected}"

    def validate(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        for choice in choices:
            if value == choice and type(value) is type(choice):
                return choice
        return _error(errors, "literal_error", loc, message, value)

    return validate


def _list(item: Validator) -> Validator:
    def validate(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        if not isinstance(value, list):
            return _error(errors, "list_type", loc, "Input should be a valid list", value)
        found = len(errors)
        out = [item(entry, (*loc, index), errors, context) for index, entry in enumerate(value)]
        return _INVALID if len(errors) > found else out

    return validate


def _dict(item: Validator) -> Validator:
    def validate(value: Any, loc: Loc, errors: list[ErrorDetails], context: _Context) -> Any:
        if not isinstance(value, dict):
            return _error(errors, "dict_type", loc, "Input should be a valid dictionary", value)
        found = len(errors)
        out = {}
        for key, entry in value.items():
            if not isinstance(key, str):
                _error(
                    errors,
                    "string_type",
                    (*loc, key, "[key]"),
                    "Input should be a valid string",
                    key,
                )
                continue
            out[key] = item(entry, (*loc, key), errors, context)
        return _INVALID if len(errors) > found else out

    return validate
