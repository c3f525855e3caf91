"""The checks of `MultiHeadAttention`'s arguments and inputs, each error
naming the argument or input, the value expected and the value found."""

import math

from keras_attn.layers.dot_product_attention import check_soft_cap


def check_positive_integer(argument, value, optional=False):
    """Raises a ValueError naming `argument` unless `value` is a positive
    integer (or None, when `optional`)."""
    if optional and value is None:
        return
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        allowed = "a positive integer or None" if optional else "a positive integer"
        raise ValueError(f"`{argument}` must be {allowed}; received {value!r}.")


def check_sink_tokens(sink_tokens, attention_window, blockwise_attention):
    """Raises a ValueError naming `attention_sink_tokens` unless it is an
    integer >= 0, and 0 without `attention_window` or with
    `blockwise_attention`."""
    if not isinstance(sink_tokens, int) or isinstance(sink_tokens, bool) or sink_tokens < 0:
        raise ValueError(
            "`attention_sink_tokens` must be an integer >= 0 (the first positions every "
            f"query sees beside its window); received {sink_tokens!r}."
        )
    if sink_tokens and attention_window is None:
        raise ValueError(
            f"`attention_sink_tokens={sink_tokens}` keeps the first positions visible "
            "beside a local window and needs `attention_window`; received "
            "attention_window=None (without a window every position is visible)."
        )
    if sink_tokens and blockwise_attention:
        raise ValueError(
            f"`attention_sink_tokens={sink_tokens}` is for a sliding window, not "
            "XPOS's blockwise attention (`blockwise_attention=True`)."
        )


def check_attention_options(
    heads, head_size, key_size, key_value_heads, query_key_norm_epsilon, attention_dropout,
    attention_scale, attention_window, blockwise_attention, log_n_train_length,
    attention_logit_soft_cap, attention_sinks, attention_sink_tokens, normalization,
):
    """Raises a ValueError naming the first of `MultiHeadAttention`'s
    arguments that is out of its range."""
    check_positive_integer("heads", heads)
    check_positive_integer("head_size", head_size)
    check_positive_integer("key_size", key_size, optional=True)
    check_positive_integer("key_value_heads", key_value_heads, optional=True)
    if key_value_heads is not None and heads % key_value_heads:
        raise ValueError(
            f"`heads` must be a multiple of `key_value_heads` (each key/value head "
            f"serves heads / key_value_heads query heads); received heads={heads} "
            f"and key_value_heads={key_value_heads}."
        )
    if query_key_norm_epsilon is not None and not (
        isinstance(query_key_norm_epsilon, (int, float))
        and not isinstance(query_key_norm_epsilon, bool)
        and query_key_norm_epsilon > 0
    ):
        raise ValueError(
            "`query_key_norm_epsilon` must be None or a positive number; received "
            f"{query_key_norm_epsilon!r}."
        )
    check_soft_cap("attention_logit_soft_cap", attention_logit_soft_cap)
    check_positive_integer("attention_window", attention_window, optional=True)
    check_sink_tokens(attention_sink_tokens, attention_window, blockwise_attention)
    if not isinstance(attention_sinks, bool):
        raise ValueError(
            "`attention_sinks` must be True or False (whether each head learns a "
            f"sink logit); received {attention_sinks!r}."
        )
    if attention_sinks and normalization == "squared_relu":
        raise ValueError(
            "`attention_sinks=True` adds a column to the softmax; "
            "normalization='squared_relu' has none."
        )
    if blockwise_attention and attention_window is None:
        raise ValueError(
            "`blockwise_attention=True` needs `attention_window` (the block "
            "size); received attention_window=None."
        )
    if log_n_train_length is not None and log_n_train_length < 2:
        raise ValueError(
            f"`log_n_train_length` must be at least 2; received {log_n_train_length!r}."
        )
    if not isinstance(attention_scale, bool) and not (
        isinstance(attention_scale, (int, float)) and 0 < attention_scale < math.inf
    ):
        raise ValueError(
            "`attention_scale` must be True, False or a positive number (the factor "
            f"of the scores); received {attention_scale!r}."
        )
    if not 0.0 <= attention_dropout < 1.0:
        raise ValueError(
            f"`attention_dropout` must be in [0, 1); received {attention_dropout!r}."
        )


def check_causal_call(layer, use_causal_mask):
    """Raises a ValueError naming `layer` when a call without
    `use_causal_mask=True` meets an option for causal attention only:
    blockwise attention, or a causal-only position (XPOS)."""
    if use_causal_mask:
        return
    if layer.blockwise_attention:
        raise ValueError(
            f"{layer.name}: blockwise attention (`blockwise_attention=True`) is "
            "causal; call the layer with `use_causal_mask=True`."
        )
    if layer.position is not None and layer.position.causal_only:
        raise ValueError(
            f"{layer.name}: position={layer.position!r} is for causal attention "
            "(its decay grows without bound towards later keys); call the layer "
            "with `use_causal_mask=True`, or use `keras_attn.layers.Rotary` "
            "for bidirectional attention."
        )


def score_scale(attention_scale, key_size):
    """The factor of the scores: `1 / sqrt(key_size)` for True, 1 for
    False, else `attention_scale` itself."""
    if attention_scale is True:
        return 1.0 / math.sqrt(key_size)
    if attention_scale is False:
        return 1.0
    return float(attention_scale)


def check_input_shapes(layer, query_shape, value_shape, key_shape, mask_shape=None):
    """Raises a ValueError naming `layer` and the inputs whose statically
    known dimensions disagree: ranks other than 3, batch sizes, key and
    value lengths, feature widths other than those the built layer takes
    (`layer._built_input_widths()`), and an `attention_mask` not
    broadcastable to the scores. Size-1 dimensions would otherwise broadcast
    silently, so a built layer reused on new shapes is checked at every call."""
    shapes = {"query": tuple(query_shape), "value": tuple(value_shape), "key": tuple(key_shape)}
    for name, shape in shapes.items():
        if len(shape) != 3:
            raise ValueError(
                f"{layer.name}: `{name}` must have rank 3, (batch, length, "
                f"features); received {name} shape {shape}."
            )

    def differ(a, b):
        return a is not None and b is not None and a != b

    if differ(shapes["key"][1], shapes["value"][1]):
        raise ValueError(
            f"{layer.name}: `key` and `value` must have the same length; received "
            f"key shape {shapes['key']} and value shape {shapes['value']}."
        )
    for name in ("value", "key"):
        if differ(shapes[name][0], shapes["query"][0]):
            raise ValueError(
                f"{layer.name}: `{name}` and `query` must have the same batch size; "
                f"received {name} shape {shapes[name]} and query shape {shapes['query']}."
            )
    if layer.built:
        for name, width in layer._built_input_widths().items():
            if differ(shapes[name][-1], width):
                raise ValueError(
                    f"{layer.name} was built for `{name}` with {width} features; "
                    f"received {name} shape {shapes[name]}."
                )
    if mask_shape is not None:
        mask_shape = tuple(mask_shape)
        batch, query_length, key_length = shapes["query"][0], shapes["query"][1], shapes["key"][1]
        target = {
            2: (query_length, key_length),
            3: (batch, query_length, key_length),
            4: (batch, layer.heads, query_length, key_length),
        }.get(len(mask_shape))
        if target is not None and any(
            differ(m, t) and m != 1 for m, t in zip(mask_shape, target)
        ):
            raise ValueError(
                f"{layer.name}: `attention_mask` of shape {mask_shape} does not "
                f"broadcast to {target} (query length {shapes['query'][1]}, key "
                f"length {shapes['key'][1]}, {layer.heads} heads)."
            )
