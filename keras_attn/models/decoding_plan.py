"""What cached decoding reads of a template: `Transformer.decoding_plan()`."""

import dataclasses


@dataclasses.dataclass(frozen=True)
class DecodingPlan:
    """What a template declares for decoding a chunk of tokens at a time
    (`generate`, `keras_attn.serving`); `CachedForward` reads nothing else
    of it.

    Attributes:
        blocks: the main stack's `TransformerBlock`s, in order.
        embed, finish_blocks, language_model_head: the hooks a step runs
            around the blocks, the full pass's own.
        encode: an encoder-decoder's encoder (`Transformer.encode`), or None.
        position_bias: the layer of a bias by distance every block adds, or
            None.
        position_table: the absolute position layer (`Embedding-Position`),
            or None.
        causal: whether a token sees only earlier keys.
        unilm: UniLM's mask by segment order.
        seq2seq: an encoder-decoder's decoder.
        conditional: whether every norm takes the `condition` input.
        pad_token_id: the id read as padding (None: padding only by mask).
        start_token_id: an encoder-decoder's first decoder input (None: the
            pad id).
        vocab_size, max_position: the config's.
        padding_mask_input: whether padding comes from a `padding_mask`.
        rope_scaling: the config's RoPE scaling (standard form) or None.
        refusal: why the template cannot decode step by step (a sentence),
            or None.
    """

    blocks: tuple
    embed: object
    finish_blocks: object
    language_model_head: object
    encode: object
    position_bias: object
    position_table: object
    causal: bool
    unilm: bool
    seq2seq: bool
    conditional: bool
    pad_token_id: object
    start_token_id: object
    vocab_size: int
    max_position: int
    padding_mask_input: bool
    rope_scaling: object
    refusal: object = None
