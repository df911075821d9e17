"""Values crossing between Python and C++ as msgpack (rayx._core.msgpack_dumps
and msgpack_loads): round trips, and hostile or impossible values refused with
a Python exception that says what was wrong. No cluster needed."""

import math

import pytest

from rayx import _core

MAX_DEPTH = 128  # rayx::detail::kMaxValueDepth


def nested_list(depth):
    value = None
    for _ in range(depth):
        value = [value]
    return value


def test_values_round_trip():
    value = {"w": [1.0, 2.5], "n": -(2**40), "u": 2**64 - 1, "s": "héllo", "b": b"\x00\x01",
             "t": True, "none": None}
    assert _core.msgpack_loads(_core.msgpack_dumps(value)) == value
    assert _core.msgpack_loads(_core.msgpack_dumps((1, 2))) == [1, 2]
    assert _core.msgpack_loads(_core.msgpack_dumps(bytearray(b"ab"))) == b"ab"
    assert math.isnan(_core.msgpack_loads(_core.msgpack_dumps(float("nan"))))


def test_array_keys_become_tuples_and_map_keys_are_refused():
    # {[1, [2]]: "x"}: an array key, nested.
    assert _core.msgpack_loads(b"\x81\x92\x01\x91\x02\xa1x") == {(1, (2,)): "x"}
    with pytest.raises(TypeError, match="map used as a map key"):
        _core.msgpack_loads(b"\x81\x81\x01\x02\x03")


def test_self_referencing_values_are_refused_naming_where():
    a = [1, 2]
    a.append(a)
    with pytest.raises(ValueError, match=r"the list at argument 0 of f\[2\] contains itself"):
        _core.msgpack_dumps(a, "argument 0 of f")
    d = {"k": []}
    d["k"].append(d)
    with pytest.raises(ValueError, match=r"contains itself"):
        _core.msgpack_dumps(d)
    # Shared (not cyclic) parts are fine: packed twice.
    shared = [1]
    assert _core.msgpack_loads(_core.msgpack_dumps([shared, shared])) == [[1], [1]]


def test_a_wide_self_referencing_list_is_refused_at_once():
    # Without cycle detection this walks 2**128 paths before the depth bound.
    a = []
    a.extend([a, a])
    with pytest.raises(ValueError, match="contains itself"):
        _core.msgpack_dumps(a)


def test_nesting_is_bounded_the_same_both_ways():
    deepest = nested_list(MAX_DEPTH)
    assert _core.msgpack_loads(_core.msgpack_dumps(deepest)) == deepest
    with pytest.raises(ValueError, match="nests deeper than 128"):
        _core.msgpack_dumps(nested_list(MAX_DEPTH + 1))
    with pytest.raises(ValueError, match="nested deeper than 128"):
        _core.msgpack_loads(b"\x91" * (MAX_DEPTH + 1) + b"\xc0")
    # The input that killed a worker: a million nested arrays.
    with pytest.raises(ValueError, match="nested deeper than 128"):
        _core.msgpack_loads(b"\x91" * 1_000_000 + b"\xc0")


def test_hostile_bytes_are_refused_with_value_error():
    cases = {
        b"": "empty input",
        b"\x93\x01\x02": "truncated",
        b"\xdd\x7f\xff\xff\xff\x01": "more than its bytes can hold",
        b"\xdb\xff\xff\xff\xffab": "truncated",
        b"\x01\x02": "1 unexpected byte",
        b"\xc1": "malformed msgpack",
    }
    for data, what in cases.items():
        with pytest.raises(ValueError, match=what):
            _core.msgpack_loads(data)
    with pytest.raises(ValueError):  # UnicodeDecodeError
        _core.msgpack_loads(b"\xa2\xff\xfe")
    with pytest.raises(TypeError, match="has no Python equivalent"):
        _core.msgpack_loads(b"\xd4\x01\x02")  # ext


def test_strided_buffers_are_refused_not_read_past_their_end():
    data = _core.msgpack_dumps([1, 2, 3])
    assert _core.msgpack_loads(memoryview(data)) == [1, 2, 3]
    with pytest.raises(BufferError):
        _core.msgpack_loads(memoryview(data)[::-1])
    with pytest.raises(TypeError):
        _core.msgpack_loads("not bytes")


def test_values_that_cannot_cross_are_refused():
    with pytest.raises(TypeError, match=r"cannot pass a set \(at v\[0\]\)"):
        _core.msgpack_dumps([{1}], "v")
    with pytest.raises(ValueError, match="does not fit in 64 bits"):
        _core.msgpack_dumps({2**70: 1}, "v")
    with pytest.raises(UnicodeEncodeError):
        _core.msgpack_dumps("\ud800")


def test_list_subclasses_are_packed_from_their_items():
    class Lying(list):
        def __len__(self):
            return 10**9

        def __getitem__(self, i):
            return Lying([1])

    assert _core.msgpack_loads(_core.msgpack_dumps(Lying([1, 2]))) == [1, 2]
