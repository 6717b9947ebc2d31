"""Value classes that cost nothing to define: what ``@dataclass(frozen=True, slots=True)`` gives,
without generating code.

A dataclass compiles its ``__init__``, ``__repr__``, ``__eq__``, ``__hash__``, ``__setattr__`` and
``__delattr__`` from source text with ``exec`` when its class is created: about 3.4 M CPU
instructions per class in Python 3.11, and ``cairn -p`` defines a hundred such classes before its
first model request. A :class:`Value` subclass gets the same behaviour from methods written once
here; defining one costs about as much as a plain class. Type checkers read it as a dataclass
(:func:`typing.dataclass_transform`)::

    class Notice(Value):
        level: str
        text: str
        source: str = ""

    class TurnResult(Value, frozen=False):  # fields may be assigned
        usage: Usage = field(default_factory=Usage)

Fields are the class's annotations in order (``ClassVar`` ones excepted), after those of a
``Value`` base; ``dataclasses.field`` sets ``default``, ``default_factory``, ``repr`` and
``compare``. Instances have ``__slots__``, compare equal when they are of the same class with equal
fields, hash by their fields (frozen ones), raise :class:`dataclasses.FrozenInstanceError` on
assignment (frozen ones), support ``match`` by position and :mod:`copy`. What they do not
do: ``dataclasses.fields``/``replace``/``asdict`` (:func:`replace` here is the first for a Value),
``__post_init__``, ``init=False``, keyword-only fields; use ``@dataclass`` for a class that needs
those. As with ``slots=True``, a default is
not a class attribute: read it from an instance (``RetryPolicy().max_attempts``). mypy does not
flag ``dataclasses.replace`` on a Value (it reads the class as a dataclass), so before turning a
dataclass into a Value, look for ``replace``/``fields``/``asdict`` calls on its instances and
make them :func:`cairn.values.replace`.
"""

from __future__ import annotations

from dataclasses import MISSING, Field, FrozenInstanceError
from operator import attrgetter
from typing import Any, ClassVar, Self, TypeVar, dataclass_transform

__all__ = ["Value", "replace"]

_V = TypeVar("_V", bound="Value")


class _Factory:
    """A field's ``default_factory``, called once per instance that does not pass the field."""

    __slots__ = ("make",)

    def __init__(self, make: Any) -> None:
        self.make = make


class _ValueType(type):
    __value_fields__: tuple[str, ...]
    __value_defaults__: dict[str, Any]
    __value_repr__: tuple[str, ...]
    __value_compare__: tuple[str, ...]

    def __new__(
        mcls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], frozen: bool = True
    ) -> _ValueType:
        if "__post_init__" in namespace:
            raise TypeError(f"{name}: a Value class runs no __post_init__; use a dataclass")
        fields: list[str] = []
        defaults: dict[str, Any] = {}
        hidden: set[str] = set()  # left out of repr
        ignored: set[str] = set()  # left out of ==, hash
        for base in reversed(bases):
            if isinstance(base, _ValueType):
                fields += [f for f in base.__value_fields__ if f not in fields]
                defaults.update(base.__value_defaults__)
                hidden |= set(base.__value_fields__) - set(base.__value_repr__)
                ignored |= set(base.__value_fields__) - set(base.__value_compare__)
        own: list[str] = []
        for field_name, annotation in namespace.get("__annotations__", {}).items():
            if _is_class_var(annotation):
                continue
            if field_name not in fields:
                fields.append(field_name)
                own.append(field_name)
            value = namespace.pop(field_name, MISSING)
            if isinstance(value, Field):
                if not value.init or value.kw_only is True:
                    raise TypeError(f"{name}.{field_name}: init=False and kw_only need a dataclass")
                if not value.repr:
                    hidden.add(field_name)
                if not value.compare:
                    ignored.add(field_name)
                if value.default_factory is not MISSING:
                    value = _Factory(value.default_factory)
                else:
                    value = value.default
            if value is not MISSING:
                defaults[field_name] = value
            elif field_name in defaults:
                del defaults[field_name]  # redeclared without a default
        first_default = next((f for f in fields if f in defaults), None)
        if first_default is not None:
            late = [f for f in fields[fields.index(first_default) :] if f not in defaults]
            if late:
                raise TypeError(f"{name}: field {late[0]!r} without a default follows one with")
        namespace["__slots__"] = tuple(own)
        namespace["__match_args__"] = tuple(fields)
        namespace["__value_fields__"] = tuple(fields)
        namespace["__value_defaults__"] = defaults
        namespace["__value_repr__"] = tuple(f for f in fields if f not in hidden)
        compared = [f for f in fields if f not in ignored]
        namespace["__value_compare__"] = tuple(compared)
        namespace["__value_key__"] = attrgetter(*compared) if compared else _no_fields
        if not frozen:  # assignable, so unhashable (as a dataclass with eq and without frozen)
            namespace.setdefault("__setattr__", object.__setattr__)
            namespace.setdefault("__delattr__", object.__delattr__)
            namespace.setdefault("__hash__", None)
        return super().__new__(mcls, name, bases, namespace)

    def __init__(
        cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any], frozen: bool = True
    ) -> None:
        super().__init__(name, bases, namespace)


def _no_fields(value: object) -> tuple[()]:
    return ()


def _is_class_var(annotation: object) -> bool:
    if isinstance(annotation, str):  # `from __future__ import annotations`
        return annotation.startswith(("ClassVar", "typing.ClassVar"))
    return annotation is ClassVar or getattr(annotation, "__origin__", None) is ClassVar


@dataclass_transform(frozen_default=True)
class Value(metaclass=_ValueType):
    """Base of a value class; see the module's documentation."""

    __slots__ = ()
    __value_key__: ClassVar[Any]  # the compared fields' values of an instance

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        cls = type(self)
        names = cls.__value_fields__
        if len(args) > len(names):
            raise TypeError(
                f"{cls.__qualname__}() takes {len(names)} positional arguments but "
                f"{len(args)} were given"
            )
        put = object.__setattr__
        for name, value in zip(names, args, strict=False):  # args may stop early
            put(self, name, value)
        if len(args) == len(names) and not kwargs:
            return
        defaults = cls.__value_defaults__
        for name in names[len(args) :]:
            if name in kwargs:
                value = kwargs.pop(name)
            elif name in defaults:
                value = defaults[name]
                if isinstance(value, _Factory):
                    value = value.make()
            else:
                raise TypeError(f"{cls.__qualname__}() missing required argument: {name!r}")
            put(self, name, value)
        if kwargs:
            name = next(iter(kwargs))
            if name in names:
                raise TypeError(f"{cls.__qualname__}() got multiple values for argument {name!r}")
            raise TypeError(f"{cls.__qualname__}() got an unexpected keyword argument {name!r}")

    def __repr__(self) -> str:
        shown = ", ".join(f"{name}={getattr(self, name)!r}" for name in type(self).__value_repr__)
        return f"{type(self).__qualname__}({shown})"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        key = self.__value_key__
        return bool(key(self) == key(other))

    def __hash__(self) -> int:
        return hash(self.__value_key__(self))

    def __setattr__(self, name: str, value: Any) -> None:
        raise FrozenInstanceError(f"cannot assign to field {name!r}")

    def __delattr__(self, name: str) -> None:
        raise FrozenInstanceError(f"cannot delete field {name!r}")

    def __replace__(self, **changes: Any) -> Self:
        cls = type(self)
        unknown = changes.keys() - set(cls.__value_fields__)
        if unknown:
            raise TypeError(f"{cls.__qualname__} has no field {min(unknown)!r}")
        return cls(**{name: getattr(self, name) for name in cls.__value_fields__} | changes)

    def __reduce__(self) -> tuple[Any, ...]:
        cls = type(self)
        return cls, tuple(getattr(self, name) for name in cls.__value_fields__)


def replace(value: _V, /, **changes: Any) -> _V:
    """A copy of ``value`` with ``changes`` (``dataclasses.replace`` for a :class:`Value`; on
    Python 3.13 ``copy.replace`` does the same through ``__replace__``)."""
    return value.__replace__(**changes)
