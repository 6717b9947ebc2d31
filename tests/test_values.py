"""cairn.values.Value behaves as the frozen slotted dataclass it replaces."""

from __future__ import annotations

import copy
from dataclasses import FrozenInstanceError, dataclass, field
from typing import ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.values import Value, replace


@dataclass(frozen=True, slots=True)
class PointClass:
    x: int
    label: str = ""
    tags: tuple[str, ...] = ()


class Point(Value):
    x: int
    label: str = ""
    tags: tuple[str, ...] = ()


class Tagged(Point):
    extra: list[str] = field(default_factory=list)


class Counter(Value, frozen=False):
    count: int = 0
    seen: list[str] = field(default_factory=list)
    kind: ClassVar[str] = "counter"


class Hidden(Value):
    name: str
    secret: str = field(default="", repr=False, compare=False)


values = st.builds(
    lambda *a: a,
    st.integers(),
    st.text(max_size=5),
    st.lists(st.text(max_size=3), max_size=3).map(tuple),
)


@given(values, values)
def test_repr_equality_and_hash_match_a_dataclass(a: tuple, b: tuple) -> None:
    assert repr(Point(*a)) == repr(PointClass(*a)).replace("PointClass", "Point")
    assert (Point(*a) == Point(*b)) is (PointClass(*a) == PointClass(*b))
    if Point(*a) == Point(*b):
        assert hash(Point(*a)) == hash(Point(*b))


def test_arguments_bind_by_position_and_keyword_with_defaults() -> None:
    assert Point(1, tags=("t",)) == Point(x=1, label="", tags=("t",))
    assert Point(1).label == "" and Point(1, "a").label == "a"
    assert Tagged(1).extra == [] and Tagged(1).extra is not Tagged(1).extra
    assert Tagged(1, "a", (), ["e"]).extra == ["e"]


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: Point(), "Point() missing required argument: 'x'"),
        (lambda: Point(1, "a", (), 4), "Point() takes 3 positional arguments but 4 were given"),
        (lambda: Point(1, x=2), "Point() got multiple values for argument 'x'"),
        (lambda: Point(1, colour="red"), "Point() got an unexpected keyword argument 'colour'"),
    ],
)
def test_a_wrong_call_is_a_type_error_naming_the_argument(call, message: str) -> None:
    with pytest.raises(TypeError) as raised:
        call()
    assert str(raised.value) == message


def test_frozen_values_refuse_assignment_and_have_no_dict() -> None:
    point = Point(1)
    with pytest.raises(FrozenInstanceError):
        point.x = 2
    with pytest.raises(FrozenInstanceError):
        del point.x
    assert not hasattr(point, "__dict__")


def test_a_mutable_value_assigns_and_is_unhashable() -> None:
    counter = Counter()
    counter.count += 1
    counter.seen.append("a")
    assert counter == Counter(1, ["a"]) and Counter.kind == "counter"
    assert "kind" not in Counter.__value_fields__
    with pytest.raises(TypeError):
        hash(counter)


def test_equality_needs_the_same_class() -> None:
    assert Point(1) != Tagged(1)
    assert Point(1) != PointClass(1)


def test_fields_out_of_repr_and_comparison() -> None:
    assert repr(Hidden("a", "s")) == "Hidden(name='a')"
    assert Hidden("a", "s") == Hidden("a", "t")
    assert hash(Hidden("a", "s")) == hash(Hidden("a", "t"))


def test_match_by_position_and_keyword() -> None:
    match Tagged(3, "x", (), ["e"]):
        case Tagged(3, label, extra=extra):
            assert (label, extra) == ("x", ["e"])
        case _:
            pytest.fail("no match")


def test_copies_are_equal_and_deep_copies_deep() -> None:
    tagged = Tagged(1, "a", ("t",), ["e"])
    assert copy.copy(tagged) == tagged
    assert copy.deepcopy(tagged).extra is not tagged.extra


def test_definitions_a_value_cannot_honour_are_refused() -> None:
    with pytest.raises(TypeError, match="without a default follows"):

        class Late(Value):
            a: int = 0
            b: int

    with pytest.raises(TypeError, match="__post_init__"):

        class Post(Value):
            a: int

            def __post_init__(self) -> None:
                pass

    with pytest.raises(TypeError, match="init=False"):

        class NoInit(Value):
            a: int = field(default=0, init=False)


def test_replace_copies_with_changes_and_refuses_unknown_fields() -> None:
    tagged = Tagged(1, "a", ("t",), ["e"])

    changed = replace(tagged, label="b")

    assert changed == Tagged(1, "b", ("t",), ["e"]) and tagged.label == "a"
    assert replace(Counter(2), count=3) == Counter(3)
    with pytest.raises(TypeError, match="Tagged has no field 'colour'"):
        replace(tagged, colour="red")
