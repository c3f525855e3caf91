"""RoFormer (Su et al., 2021): BERT with rotary position embeddings."""

from keras_attn.models.bert import Bert
from keras_attn.models.registry import register_variant


@register_variant("roformer")
class Roformer(Bert):
    """RoFormer: BERT whose queries and keys are rotated by their positions,
    with no absolute position table.

    Su, Lu, Pan, Murtadha, Wen, Liu (2021), "RoFormer: Enhanced Transformer
    with Rotary Position Embedding", https://arxiv.org/abs/2104.09864. Each
    head's query and key features are rotated in adjacent pairs
    `(x_{2m}, x_{2m+1})` by the angle `n * 10000^(-2m/d)` at position `n`
    (`keras_attn.layers.RotaryEmbedding`, `d` the query/key width), so
    scores depend on relative positions only; with the config's
    `rotary_value: true` the values are rotated the same way. Everything
    else (embedding LayerNorm, post-LN blocks, the masked-LM head) is
    BERT's. Because nothing depends on absolute positions, the model takes
    any length (`max_position_embeddings` bounds nothing) and works with
    `attention_window` (the LocalMaskBaseline) for extrapolation.

    Checkpoints: Hugging Face `model_type: roformer` directories
    (`RoFormerModel`, `RoFormerForMaskedLM`; such a config selects this
    variant), whose outputs it reproduces to float32 rounding, and
    bert4keras's RoFormer checkpoints in Google's format (BERT's names
    without `position_embeddings`, a `bert_config.json`). It also reads any
    BERT checkpoint, leaving the position table unused (reported in an
    `UnusedWeightsWarning`): a research variant, rotary positions on BERT
    weights, that needs fine-tuning. Where bert4keras differs: its RoFormer
    normalises with epsilon 1e-7 (Keras' default) in the blocks; this class
    uses the config's `layer_norm_eps`, as Hugging Face does.
    """

    position_encoding = "rotary"
    position_embedding = None
    checkpoint_family = "roformer"
