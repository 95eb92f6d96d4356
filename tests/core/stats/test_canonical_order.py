"""``canonical_order``: the rows of one keyed table sort to the same sequence whatever order they come in."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from certa.engine.core.stats.pairing import canonical_order, group_codes

KEYS = st.one_of(st.integers(-(2**70), 2**70), st.text(max_size=6), st.floats(allow_nan=False, allow_infinity=False))


@settings(max_examples=200, deadline=None)
@given(keys=st.lists(st.tuples(KEYS, st.integers(0, 3)), unique=True, min_size=1, max_size=40),
       seed=st.integers(0, 2**32 - 1))
def test_any_permutation_of_unique_keys_sorts_to_one_sequence(keys: list[tuple[object, int]], seed: int) -> None:
    """Mixed ints (beyond 2⁵³ too), floats and text in the first field, an epoch in the second."""
    first = np.empty(len(keys), dtype=object)
    first[:] = [k[0] for k in keys]
    second = np.array([k[1] for k in keys])
    permutation = np.random.default_rng(seed).permutation(len(keys))
    sorted_once = [keys[i] for i in canonical_order(first, second)]
    sorted_again = [keys[permutation[i]] for i in canonical_order(first[permutation], second[permutation])]
    assert [(type(a), a, b) for a, b in sorted_once] == [(type(a), a, b) for a, b in sorted_again]


def test_numbers_sort_by_value_before_text_and_fields_in_order() -> None:
    ids = np.array(["b", 10, 2, "a", 1.5], dtype=object)
    assert ids[canonical_order(ids)].tolist() == [1.5, 2, 10, "a", "b"]
    names, epochs = np.array(["x", "y", "x"]), np.array([2, 1, 1])
    assert canonical_order(names, epochs).tolist() == [2, 0, 1]


def test_no_key_column_is_an_error() -> None:
    with pytest.raises(ValueError, match="at least one key column"):
        canonical_order()


@settings(max_examples=50, deadline=None)
@given(keys=st.lists(st.tuples(KEYS, st.integers(0, 2)), min_size=1, max_size=40))
def test_group_codes_number_equal_keys_alike_in_the_canonical_order(keys: list[tuple[object, int]]) -> None:
    first = np.empty(len(keys), dtype=object)
    first[:] = [k[0] for k in keys]
    codes, n = group_codes(first)
    typed = [(type(k[0]), str(k[0])) for k in keys]  # canonical_keys' equality: the type and the text
    assert n == len(set(typed)) and sorted(set(codes.tolist())) == list(range(n))
    for i in range(len(keys)):
        for j in range(len(keys)):
            assert (codes[i] == codes[j]) == (typed[i] == typed[j])
    order = canonical_order(first)
    assert np.all(np.diff(codes[order]) >= 0)  # codes rise along the canonical order


def test_group_codes_of_several_fields_and_of_nothing() -> None:
    codes, n = group_codes(np.array(["b", "a", "b", "a"]), np.array([1, 1, 1, 2]))
    assert (codes.tolist(), n) == ([2, 0, 2, 1], 3)
    ids = np.array([1, "1", 1.0], dtype=object)  # an int, a text and a float: three samples
    assert group_codes(ids)[1] == 3
    empty, none = group_codes(np.array([], dtype=object))
    assert empty.size == 0 and none == 0
