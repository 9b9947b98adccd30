import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from tokenized_bandit_gym.evaluation.ddmc.common_suffix import common_suffix_lengths, diverged_mask


def reference_common_suffix(x, y):
    """Plain definition: for each k, count equal tokens walking back from position k."""
    out = []
    for k in range(1, min(len(x), len(y)) + 1):
        c = 0
        while c < k and x[k - 1 - c] == y[k - 1 - c]:
            c += 1
        out.append(c)
    return out


def test_paper_example():
    # Paper section 6.1: x = (a,b,c,d,e,f), y = (a,x,y,d,e,f).
    x = list("abcdef")
    y = list("axydef")
    lengths = common_suffix_lengths(x, y)
    groups = {c: [k for k in range(1, 7) if lengths[k - 1] == c] for c in range(4)}
    assert groups == {0: [2, 3], 1: [1, 4], 2: [5], 3: [6]}


def test_identical_sequences_have_full_common_suffix_and_never_diverge():
    x = [5, 3, 3, 9]
    np.testing.assert_array_equal(common_suffix_lengths(x, list(x)), [1, 2, 3, 4])
    assert not diverged_mask(x, list(x)).any()


def test_unequal_lengths_compare_aligned_prefixes_up_to_the_shorter():
    x = [1, 2, 3]
    y = [1, 7, 3, 4, 5]
    np.testing.assert_array_equal(common_suffix_lengths(x, y), [1, 0, 1])
    np.testing.assert_array_equal(common_suffix_lengths(y, x), [1, 0, 1])
    np.testing.assert_array_equal(diverged_mask(x, y), [False, True, True])


def test_empty_and_fully_different():
    assert common_suffix_lengths([], [1, 2]).shape == (0,)
    np.testing.assert_array_equal(common_suffix_lengths([1, 2, 3], [4, 5, 6]), [0, 0, 0])


def test_rejects_non_sequences():
    with pytest.raises(ValueError, match="one-dimensional"):
        common_suffix_lengths(np.zeros((2, 2)), [1, 2])


@given(
    st.lists(st.integers(0, 2), max_size=12),
    st.lists(st.integers(0, 2), max_size=12),
)
def test_matches_plain_definition(x, y):
    np.testing.assert_array_equal(common_suffix_lengths(x, y), reference_common_suffix(x, y))
    expected_diverged = [x[:k] != y[:k] for k in range(1, min(len(x), len(y)) + 1)]
    np.testing.assert_array_equal(diverged_mask(x, y), np.array(expected_diverged, dtype=bool))
