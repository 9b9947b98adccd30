import os

import numpy as np
import pytest
import torch

from tokenized_bandit_gym.evaluation.ddmc import (
    PrefixEmbedder,
    build_prefix_pair_table,
    common_suffix_lengths,
    embedding_distances,
    load_answer_pairs,
    resolve_dataset,
)
from tokenized_bandit_gym.evaluation.ddmc.resources import resolve_model

os.environ["HF_HUB_OFFLINE"] = "1"


@pytest.fixture(scope="module")
def embedder():
    return PrefixEmbedder("stories260K", batch_size=3)


def test_resolve_model():
    path = resolve_model("stories260K")
    assert os.path.isfile(os.path.join(path, "config.json"))
    assert resolve_model(path) == path
    assert resolve_model("org/some-model") == "org/some-model"  # hub ids pass through untouched


def test_cumulative_sum_equals_direct_forward_of_each_prefix(embedder):
    texts = ["Once upon a time there was a cat.", "Lily", "The dog ran to the park and saw a big red ball there."]
    sequences = [embedder.tokenize(t) for t in texts]
    prefixes = embedder.prefix_embeddings(sequences)  # batched, right-padded, one forward per sequence
    assert [p.shape for p in prefixes] == [(len(s), embedder.embedding_dim) for s in sequences]
    with torch.no_grad():
        for sequence, rows in zip(sequences, prefixes, strict=True):
            for k in range(1, len(sequence) + 1):
                hidden = embedder.model(input_ids=torch.tensor([sequence[:k]])).last_hidden_state[0]  # (k, d)
                torch.testing.assert_close(rows[k - 1], hidden.mean(dim=0), atol=1e-5, rtol=0)


def test_prefix_table_matches_direct_computation(embedder):
    pairs = load_answer_pairs(resolve_dataset("truthfulqa"), max_items=2)
    table = build_prefix_pair_table(pairs, embedder)
    assert table.num_items == 2 and table.num_pairs == len(pairs)
    pair = pairs[1]
    x, y = embedder.tokenize(pair.text_a), embedder.tokenize(pair.text_b)
    ex, ey = embedder.prefix_embeddings([x, y])
    m = min(len(x), len(y))
    rows = table.pair == 1
    np.testing.assert_array_equal(table.common_suffix[rows], common_suffix_lengths(x, y))
    # The table batches pairs differently from this direct call: float32 GEMM blocking differs (~2e-6).
    np.testing.assert_allclose(table.distances[rows], embedding_distances(ex[:m], ey[:m]).numpy(), atol=1e-5)
    # The shared query makes the first prefixes identical: distance 0, not diverged.
    same = ~table.diverged & rows
    assert same.any() and np.all(table.distances[same] < 1e-5)


def test_rejects_bad_sequences(embedder):
    with pytest.raises(ValueError, match="tokens"):
        embedder.prefix_embeddings([[]])
