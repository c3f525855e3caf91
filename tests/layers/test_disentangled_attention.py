"""DisentangledAttention and RelativeEmbedding (DeBERTa) through the layer
harness, against a numpy reference that loops over every (query, key) pair,
and their argument errors. Parity with transformers' DeBERTa is in
tests/models/test_deberta_v2.py."""

import math

import numpy as np
import pytest

import keras_attn
from tests.harness import run_layer_test, to_numpy

RNG = np.random.default_rng(7)
LENGTH, WIDTH, HEADS, SIZE = 9, 8, 2, 3
BUCKETS, MAX_DISTANCE = 4, 10
# The harness feeds every input as a batch (its fit step too): the table's
# `2 * span` rows are as many as the sequences.
BATCH = 2 * BUCKETS


def random(*shape):
    return RNG.normal(size=shape).astype("float32")


def bucket(distance):
    """DeBERTa's log bucket of one distance, in float64 (the cases avoid
    the float32 rounding boundaries)."""
    mid = BUCKETS // 2
    if abs(distance) <= mid:
        return distance
    far = mid + math.ceil(math.log(abs(distance) / mid) / math.log((MAX_DISTANCE - 1) / mid)
                          * (mid - 1))
    return int(math.copysign(far, distance))


def dense(layer, x):
    return x @ to_numpy(layer.kernel) + to_numpy(layer.bias)


def numpy_attention(layer, inputs):
    """`softmax_j((q_i.k_j + q_i.Kp_r + k_j.Qp_r) * scale)` per pair, masked
    keys left out."""
    x, table, mask = inputs["query"], inputs["distance_bias"], inputs["attention_mask"]
    span = layer.span
    shared = layer.share_attention_key
    q = dense(layer.query_dense, x).reshape(BATCH, LENGTH, HEADS, SIZE)
    k = dense(layer.key_dense, x).reshape(BATCH, LENGTH, HEADS, SIZE)
    v = dense(layer.value_dense, x).reshape(BATCH, LENGTH, HEADS, SIZE)
    position_keys = dense(layer.key_dense if shared else layer.position_key_dense, table)
    position_queries = dense(layer.query_dense if shared else layer.position_query_dense, table)
    position_keys = position_keys.reshape(2 * span, HEADS, SIZE)
    position_queries = position_queries.reshape(2 * span, HEADS, SIZE)
    scale = 1 / math.sqrt(SIZE * 3)
    out = np.zeros((BATCH, LENGTH, HEADS, SIZE))
    for b in range(BATCH):
        for n in range(HEADS):
            for i in range(LENGTH):
                scores = np.full(LENGTH, -np.inf)
                for j in range(LENGTH):
                    if not mask[b, 0, j]:
                        continue
                    r = min(max(bucket(i - j) + span, 0), 2 * span - 1)
                    scores[j] = scale * (q[b, i, n] @ k[b, j, n] + q[b, i, n] @ position_keys[r, n]
                                         + k[b, j, n] @ position_queries[r, n])
                weights = np.exp(scores - scores.max())
                out[b, i, n] = (weights / weights.sum()) @ v[b, :, n]
    return out.reshape(BATCH, LENGTH, HEADS * SIZE) @ to_numpy(layer.output_dense.kernel) + (
        to_numpy(layer.output_dense.bias)
    )


@pytest.mark.parametrize("shared", [True, False], ids=["shared_key", "own_projections"])
def test_disentangled_attention_harness_and_reference(shared, tmp_path):
    mask = np.ones((BATCH, 1, LENGTH), bool)
    mask[1, 0, 6:] = False
    run_layer_test(
        keras_attn.layers.DisentangledAttention,
        dict(heads=HEADS, head_size=SIZE, position_attention_types=["p2c", "c2p"],
             span=BUCKETS, position_buckets=BUCKETS, max_relative_positions=MAX_DISTANCE,
             share_attention_key=shared, bias_initializer="random_normal"),
        inputs={"query": random(BATCH, LENGTH, WIDTH), "distance_bias": random(2 * BUCKETS, WIDTH),
                "attention_mask": mask},
        expected_output_shape=(BATCH, LENGTH, WIDTH),
        reference=numpy_attention,
        tmp_path=tmp_path if shared else None,
    )


def test_relative_embedding_harness_and_reference(tmp_path):
    def layer_normalised(layer, inputs):
        table = to_numpy(layer.embeddings)
        mean = table.mean(-1, keepdims=True)
        variance = table.var(-1, keepdims=True)
        return (table - mean) / np.sqrt(variance + 1e-7) * to_numpy(layer.norm.gamma) + (
            to_numpy(layer.norm.beta)
        )

    run_layer_test(
        keras_attn.layers.RelativeEmbedding,
        dict(span=BUCKETS, width=WIDTH, normalize=True, embeddings_initializer="random_normal"),
        inputs={"inputs": random(BATCH, LENGTH, WIDTH)},
        expected_output_shape=(2 * BUCKETS, WIDTH),
        reference=layer_normalised,
        tmp_path=tmp_path,
    )


@pytest.mark.parametrize("arguments, message", [
    (dict(position_attention_types=["c2p", "c2c"]), r"\['c2p', 'c2c'\]"),
    (dict(position_attention_types=[]), "non-empty list"),
    (dict(position_attention_types="c2p"), "non-empty list"),
    (dict(position_buckets=8, max_relative_positions=5), r"`max_relative_positions` \(5\)"),
    (dict(attention_window=4), "takes no `attention_window`"),
    (dict(key_value_heads=1), "takes no `key_value_heads`"),
])
def test_argument_errors_name_the_argument(arguments, message):
    with pytest.raises(ValueError, match=message):
        keras_attn.layers.DisentangledAttention(HEADS, SIZE, **arguments)


def test_the_table_is_required():
    layer = keras_attn.layers.DisentangledAttention(HEADS, SIZE, span=4)
    with pytest.raises(ValueError, match=r"`distance_bias` must be the \(2 \* span, width\)"):
        layer(random(1, 3, WIDTH))
