import numpy as np
import pytest
import torch

from tokenized_bandit_gym.evaluation.ddmc.distances import DISTANCE_NAMES, embedding_distances


def test_distances_against_hand_computation():
    x = torch.tensor([[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    y = torch.tensor([[0.0, 4.0, 3.0], [0.0, 0.0, 0.0]], dtype=torch.float64)
    # x - y = (1, -2, 0): <1, x - y> = -1 -> |.| = 1; l1 = 3; l2 = sqrt(5); l3 = 9^(1/3); l4 = 17^(1/4).
    expected = [1.0, 5**0.5, 3.0, 9 ** (1 / 3), 17**0.25]
    out = embedding_distances(x, y)
    assert out.shape == (2, len(DISTANCE_NAMES))
    np.testing.assert_allclose(out[0].numpy(), expected, rtol=1e-12)
    np.testing.assert_array_equal(out[1].numpy(), np.zeros(5))


def test_distances_are_symmetric_and_shape_checked():
    g = torch.Generator().manual_seed(0)
    x, y = torch.randn(4, 6, generator=g), torch.randn(4, 6, generator=g)
    torch.testing.assert_close(embedding_distances(x, y), embedding_distances(y, x))
    with pytest.raises(ValueError, match="same shape"):
        embedding_distances(x, y[:, :5])
