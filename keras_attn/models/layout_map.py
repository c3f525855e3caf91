"""`get_layout_map`: Megatron-style tensor parallelism for the builder's models."""

import keras

# Any model path before a layer name: a functional model's variables have
# none, a model nested in another one gets the outer names.
_PREFIX = r"(?:.*/)?"
# `Transformer-{i}-...`, ALBERT's shared `Transformer-...` (no index), or an
# encoder-decoder's `Encoder-Transformer-{i}-...` and `Decoder-...` (with
# the decoder's `MultiHeadCrossAttention`).
_ATTENTION = _PREFIX + r"(?:Encoder-|Decoder-)?Transformer(?:-\d+)?-MultiHead(?:Self|Cross)Attention"
_FEED_FORWARD = _PREFIX + r"(?:Encoder-|Decoder-)?Transformer(?:-\d+)?-FeedForward"


def _megatron_table(model_axis):
    """Variable path regex -> axes, one row per sharded variable."""
    columns, rows = (None, model_axis), (model_axis, None)
    return {
        # The projections that open a sublayer are split by columns, so each
        # device holds whole heads (attention) or whole hidden units (the
        # feed-forward activation) and works on them without communicating.
        _ATTENTION + r"/(?:query|key|value)_dense/kernel": columns,
        _ATTENTION + r"/(?:query|key|value)_dense/bias": (model_axis,),
        _FEED_FORWARD + r"/(?:intermediate|gate)_dense/kernel": columns,
        _FEED_FORWARD + r"/(?:intermediate|gate)_dense/bias": (model_axis,),
        # The projections that close a sublayer are split by rows: each device
        # multiplies its own slice and one all-reduce sums the partial
        # results. Their biases stay replicated, added once after the sum.
        _ATTENTION + r"/output_dense/kernel": rows,
        _FEED_FORWARD + r"/output_dense/kernel": rows,
    }


def get_layout_map(device_mesh, model_axis="model"):
    """A `keras.distribution.LayoutMap` sharding the attention and feed-forward
    kernels of `build_transformer_model`'s models over one mesh axis.

    The layout is Megatron-LM's tensor parallelism (Shoeybi et al., 2019,
    https://arxiv.org/abs/1909.08053). With `p` devices, a kernel split by
    columns `W = [W_1 ... W_p]` and one split by rows `V = [V_1; ...; V_p]`:

        act(X W + b) V = sum_r act(X W_r + b_r) V_r

    so device `r` computes its term and one all-reduce adds them. The
    feed-forward's `intermediate_dense` and `gate_dense` are split by
    columns, `output_dense` by rows; attention's query, key and value kernels
    by columns (whole heads per device when `p` divides the heads; with
    fewer key/value heads than `p`, XLA adds the communication) and its
    `output_dense` by rows. Closing biases, embeddings, LayerNorms, heads and
    talking heads' mixing kernels stay replicated. XLA's SPMD partitioner
    places the collectives under `keras.distribution.ModelParallel`; the
    sharded dimensions must be divisible by the size of `model_axis`.

    Args:
        device_mesh: a `keras.distribution.DeviceMesh`, for example of shape
            `(data, model)` with axis names `("batch", "model")`.
        model_axis: the name of the mesh axis the kernels are split over.

    Returns:
        A `keras.distribution.LayoutMap` from variable path regexes to
        layouts; unmatched variables are replicated.

    Raises:
        ValueError: if `device_mesh` has no axis named `model_axis`.

    Example:

    ```python
    devices = keras.distribution.list_devices()  # 8 devices
    mesh = keras.distribution.DeviceMesh((2, 4), ["batch", "model"], devices)
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(
            layout_map=keras_attn.get_layout_map(mesh), batch_dim_name="batch"
        )
    )
    model = keras_attn.build_transformer_model("bert_base/config.json")
    ```
    """
    axis_names = list(device_mesh.axis_names)
    if model_axis not in axis_names:
        raise ValueError(
            f"The device mesh has no axis {model_axis!r} to shard the kernels "
            f"over; its axes are {axis_names}. Pass `model_axis=` one of them."
        )
    layout_map = keras.distribution.LayoutMap(device_mesh)
    for path, axes in _megatron_table(model_axis).items():
        layout_map[path] = axes
    return layout_map
