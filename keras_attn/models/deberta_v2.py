"""DeBERTa v2 and v3 (He et al., 2021): BERT's post-LN encoder with
disentangled attention over a shared table of relative positions."""

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.layers.disentangled_attention import DisentangledAttention
from keras_attn.layers.relative_embedding import RelativeEmbedding
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("deberta_v2")
class DebertaV2(Transformer):
    """DeBERTa v2/v3: BERT's post-LN blocks whose attention adds
    content-to-position and position-to-content terms
    (`keras_attn.layers.DisentangledAttention`) read from one table of
    relative-position embeddings (`Relative-Embedding`, a
    `keras_attn.layers.RelativeEmbedding`, layer-normalised with
    `relative_embedding_norm`) that the model computes once per pass and
    hands to every block.

    He, Liu, Gao, Chen (2021), "DeBERTa: Decoding-enhanced BERT with
    Disentangled Attention", https://arxiv.org/abs/2006.03654; He, Gao, Chen
    (2021), "DeBERTaV3", https://arxiv.org/abs/2111.09543. The config's
    `position_attention_types` (`pos_att_type`) say which terms each layer
    adds, `position_buckets` and `max_relative_distance`
    (`max_relative_positions`) how distances are bucketed, and
    `share_attention_key` (`share_att_key`, v3) whether the table is
    projected by each layer's own query/key projections. Scores are scaled
    by `1 / sqrt(head_size * (1 + number of terms))`. A config without
    `position_attention_types` (`relative_attention: false`) is BERT's
    attention. Absolute positions are added to the embeddings with
    `position_biased_input` (v2's base configs; v3 has none), token types
    with `type_vocab_size > 0`.

    `application="mlm"` is `DebertaV2ForMaskedLM`'s head (both its legacy
    `cls.predictions` and its `lm_predictions.lm_head`):
    `LN(act(Dense(h)))` then the tied token embedding and a bias;
    `application="encoder"` is `DebertaV2Model`'s `last_hidden_state`.
    `with_pool="gelu"` (the config's `pooler_hidden_act`) adds
    `DebertaV2ForSequenceClassification`'s `ContextPooler` (`Pooler-Dense`
    on the first token, read from `pooler.dense`); its `classifier` is a
    dense layer on `pooled_output` that the builder does not make (a
    checkpoint's `classifier` weights are reported unused).

    Padding: tokens equal to the config's `pad_token_id` are padding (or a
    `padding_mask` with `padding_mask_input=True`); right padding gives
    transformers' numbers at the real tokens. DeBERTa does not generate.

    Checkpoints: Hugging Face `model_type: deberta-v2` directories
    (safetensors or `pytorch_model.bin`); see
    `keras_attn.checkpoints.families.deberta_v2` for the configs refused.
    """

    checkpoint_family = "deberta_v2"
    applications = ("encoder", "mlm")
    attention_layer = DisentangledAttention

    def __init__(self, config, *args, **kwargs):
        if config.embedding_width != config.hidden_size:
            raise ValueError(
                "DeBERTa projects embeddings narrower than the blocks before its embedding "
                "LayerNorm (`embed_proj`), which this builder does not build; received "
                f"embedding_size={config.embedding_size}, hidden_size={config.hidden_size}."
            )
        super().__init__(config, *args, **kwargs)

    @property
    def position_span(self):
        """The relative positions the table holds on each side: the buckets,
        else `max_relative_distance` (default `max_position`)."""
        config = self.config
        return config.position_buckets or config.max_relative_distance or config.max_position

    def make_position_embedding(self):
        if not self.config.position_biased_input:
            return None
        return super().make_position_embedding()

    def make_position_bias(self):
        if self.config.position_attention_types is None:
            return None
        return RelativeEmbedding(
            self.position_span,
            self.config.hidden_size,
            normalize=self.config.relative_embedding_norm,
            epsilon=self.norm_epsilon(),
            embeddings_initializer=self.initializer(),
            name=names.RELATIVE_EMBEDDING,
        )

    def make_attention(self, index):
        arguments = self.attention_arguments(index)
        if self.config.position_attention_types is None:
            return layers.MultiHeadAttention(**arguments)
        config = self.config
        return DisentangledAttention(
            position_attention_types=config.position_attention_types,
            span=self.position_span,
            position_buckets=config.position_buckets,
            max_relative_positions=config.max_relative_distance or config.max_position,
            share_attention_key=config.share_attention_key,
            position_dropout=config.dropout_rate,
            **arguments,
        )
