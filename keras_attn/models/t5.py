"""T5 (Raffel et al., 2020): the encoder-decoder, v1.0 and v1.1 (mT5)."""

import keras
from keras import ops

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.layers import masking
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import step_of
from keras_attn.models.input_contract import InputContract
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer
from keras_attn.models.transformer_block import TransformerBlock


@register_variant("t5")
class T5(Transformer):
    """T5 v1.0: an encoder-decoder of pre-norm blocks with bucketed relative
    position biases.

    Raffel, Shazeer, Roberts, Lee, Narang, Matena, Zhou, Li, Liu (2020),
    "Exploring the Limits of Transfer Learning with a Unified Text-to-Text
    Transformer", https://arxiv.org/abs/1910.10683. As Hugging Face's
    `T5ForConditionalGeneration` computes it:

    - one token embedding (`Embedding-Token`) for the encoder, the decoder
      and (v1.0) the head; no absolute positions;
    - each stack's blocks are pre-norm, `x + Drop(f(RMSNorm(x)))`, with an
      RMS norm without bias or mean (`keras_attn.layers.RMSNormalization`), then
      a final norm and dropout (`Encoder-Output-Norm`,
      `Decoder-Output-Norm`);
    - attention has no biases and no `1/sqrt(d)` scaling of the scores, and
      each stack adds one learned `BucketedPositionBias` to every block's
      self-attention scores (bidirectional in the encoder, causal in the
      decoder); the decoder's cross-attention has none;
    - the feed-forward has no biases: ReLU (v1.0) or gated GELU (v1.1,
      `feed_forward_proj: gated-gelu`);
    - v1.0's head is the tied embedding applied to `h * d_model ** -0.5`;
      v1.1's (`"t5.1.1"`, `"mt5.1.1"`) an untied `Decoder-Output-LM`.

    The model (`application="seq2seq"`, the only one) takes
    `encoder_token_ids` and `decoder_token_ids` (the target shifted right,
    starting with `decoder_start_token_id`, the pad id 0), plus
    `encoder_padding_mask` and `decoder_padding_mask` with
    `padding_mask_input=True`, and returns the decoder's logits. Encoder
    padding is the pad id unless a mask is given; the decoder's ids are
    never read as padding. `model.generate(sources, ...)` encodes each
    source once; `"t5_encoder"` builds the encoder alone. It reads Hugging
    Face `t5`/`mt5` directories and Mesh TensorFlow checkpoints by
    bert4keras's names. Unlike bert4keras, the cross-attention has no
    position bias and v1.1's untied head is not rescaled, as the checkpoints
    were trained. Tokenizer: `keras_attn.T5Tokenizer`.
    """

    applications = ("seq2seq",)
    checkpoint_family = "t5"
    pooler = False
    position_embedding = None
    norm = "rms"
    norm_first = True
    final_norm = True
    family_layer_norm_epsilon = 1e-6
    # v1.0: the head is the token embedding, on `h * d_model ** -0.5`.
    tied_head = True
    default_hidden_act = "relu"
    token_types = False
    embedding_norm = False
    use_bias = False
    # The token embedding as the head (v1.0: on `h * d_model ** -0.5`), or
    # the untied `Decoder-Output-LM` (`tied_head = False`).
    head = "embedding"
    # The stack the template's walk runs, whose layers are named after it:
    # the decoder, attending to the encoder (`T5Encoder`: the encoder).
    stack = names.DECODER

    def __init__(self, config, application="seq2seq", **kwargs):
        if kwargs.get("prefix"):
            raise ValueError(
                f"{type(self).__name__} does not take a `prefix` (its layer names are "
                "fixed); build it without one."
            )
        if config.attention_window is not None or config.log_n_train_length is not None:
            raise ValueError(
                f"{type(self).__name__} takes neither attention_window nor "
                "log_n_train_length (its relative position biases are learned)."
            )
        if config.hierarchical_position:
            raise ValueError(
                f"{type(self).__name__} does not take hierarchical_position (it has no "
                "absolute position table; its relative position biases are learned)."
            )
        super().__init__(config, application=application, **kwargs)

    # Layers ----------------------------------------------------------------

    def dropout(self, name):
        return keras.layers.Dropout(self.config.dropout_rate, name=name)

    def attention(self, name):
        config = self.config
        return layers.MultiHeadAttention(
            heads=config.num_heads,
            head_size=config.head_size,
            key_size=config.key_size,
            use_bias=self.use_bias,
            attention_scale=False,
            attention_dropout=config.attention_dropout_rate,
            kernel_initializer=self.initializer(),
            name=name,
        )

    def stack_block(self, stack, index):
        """Block `index` of `stack` (`"Encoder"` or `"Decoder"`), with
        bert4keras's layer names."""
        config = self.config
        attention = names.attention(index, stack)
        feed_forward = names.feed_forward(index, stack)
        cross = {}
        if stack == names.DECODER:
            name = names.cross_attention(index, stack)
            cross = {
                "cross_attention": self.attention(name),
                "cross_attention_norm": self.layer_norm(names.norm(name)),
                "cross_attention_dropout": self.dropout(names.dropout(name)),
                "cross_attention_add": keras.layers.Add(name=names.add(name)),
            }
        return TransformerBlock(
            attention=self.attention(attention),
            feed_forward=layers.FeedForward(
                config.intermediate_size,
                activation=self.hidden_act(),
                use_bias=self.use_bias,
                gated=self.feed_forward_gated(),
                kernel_initializer=self.initializer(),
                name=feed_forward,
            ),
            attention_norm=self.layer_norm(names.norm(attention)),
            feed_forward_norm=self.layer_norm(names.norm(feed_forward)),
            attention_dropout=self.dropout(names.dropout(attention)),
            feed_forward_dropout=self.dropout(names.dropout(feed_forward)),
            attention_add=keras.layers.Add(name=names.add(attention)),
            feed_forward_add=keras.layers.Add(name=names.add(feed_forward)),
            norm_first=True,
            **cross,
        )

    def position_bias_layer(self, stack):
        config = self.config
        return layers.BucketedPositionBias(
            config.num_heads,
            num_buckets=config.relative_attention_num_buckets,
            max_distance=config.relative_attention_max_distance,
            bidirectional=stack == names.ENCODER,
            embeddings_initializer=self.initializer(),
            name=names.relative_position(stack),
        )

    # The template's hooks (its one walk builds T5 as every variant): the
    # main stack is `stack`'s, and the encoder-decoder adds the encoder
    # (`make_encoder`, run by `encode`).

    def make_attention_mask(self):
        # Padding alone: the blocks' mask is computed without a layer.
        return None

    def make_embedding_layers(self):
        return {
            "token": layers.TokenEmbedding(
                self.config.vocab_size,
                self.config.hidden_size,
                embeddings_initializer=self.initializer(),
                name=names.EMBEDDING_TOKEN,
            ),
            "position": None,
            "dropout": self.dropout(names.in_stack(names.EMBEDDING_DROPOUT, self.stack)),
        }

    def make_encoder(self):
        if self.stack == names.ENCODER:
            return None
        encoder = {
            "dropout": self.dropout(names.in_stack(names.EMBEDDING_DROPOUT, names.ENCODER)),
            "position_bias": self.position_bias_layer(names.ENCODER),
            "norm": self.layer_norm(names.in_stack(names.OUTPUT_NORM, names.ENCODER)),
            "output_dropout": self.dropout(names.in_stack(names.OUTPUT_DROPOUT, names.ENCODER)),
        }
        blocks = [self.stack_block(names.ENCODER, index) for index in range(self.config.num_layers)]
        return encoder, blocks

    def stack_depth(self):
        return self.config.decoder_layers if self.stack == names.DECODER else self.config.num_layers

    def make_position_bias(self):
        return self.position_bias_layer(self.stack)

    def make_block(self, index):
        return self.stack_block(self.stack, index)

    def make_output_norm(self):
        return self.layer_norm(names.in_stack(names.OUTPUT_NORM, self.stack))

    def make_output_dropout(self):
        return self.dropout(names.in_stack(names.OUTPUT_DROPOUT, self.stack))

    def make_head_layers(self):
        if self.tied_head or not self.with_mlm:
            return {}
        return {
            "lm": keras.layers.Dense(
                self.config.vocab_size,
                use_bias=False,
                kernel_initializer=self.initializer(),
                name=names.DECODER_OUTPUT_LM,
            )
        }

    # The passes ------------------------------------------------------------

    def encode(self, token_ids, padding_mask=None):
        """The encoder's output `(batch, source_length, hidden_size)` and
        its real tokens (boolean `(batch, source_length)`), in the full pass
        and for generation (which encodes each source once)."""
        encoder = self.encoder_layers
        valid = masking.real_tokens(token_ids, self.config.pad_token_id, padding_mask)
        hidden = self.embedding_layers["token"](token_ids)
        # The padding as the embeddings' Keras mask (see `embedding_mask`).
        mask = self.embedding_mask(name=names.in_stack(names.embedding_mask(), names.ENCODER))
        hidden = encoder["dropout"](mask(hidden, mask=valid))
        distance_bias = encoder["position_bias"](hidden, by_distance=True)
        mask = ops.expand_dims(valid, 1)
        for block in self.encoder_blocks:
            hidden = block(hidden, attention_mask=mask, distance_bias=distance_bias)
        hidden = encoder["output_dropout"](encoder["norm"](hidden))
        return hidden, valid

    def embed(self, token_ids, segment_ids=None, padding_mask=None, stream="",
              condition=None, step=FULL_PASS, cache_step=None):
        """The main stack's embedding: the shared token embedding (and its
        dropout in the full pass); positions enter through the bias. In the
        full pass the stack's real tokens (`padding_mask`, else the pad id
        in the encoder; the decoder's ids are never padding) ride on it as
        its Keras mask."""
        step = step_of(step, cache_step)
        valid = step.real_tokens(token_ids, self.pad_token_id, padding_mask)
        hidden = step.run(self.embedding_layers["token"], token_ids)
        mask = self.embedding_mask(name=names.in_stack(names.embedding_mask(), self.stack))
        return step.dropout(self.embedding_layers["dropout"], step.mask(mask, hidden, valid))

    def language_model_head(self, hidden, condition=None, step=FULL_PASS, cache_step=None):
        """v1.0: `(h * d_model ** -0.5) E^T`; v1.1: `Decoder-Output-LM`."""
        run = step_of(step, cache_step).run
        if self.tied_head:
            scaled = hidden * (self.config.hidden_size ** -0.5)
            return run(self.embedding_layers["token"], scaled, reverse=True)
        return run(self.head_layers["lm"], hidden)

    def make_input_contract(self):
        limits, groups = {}, {}
        for stack in ("encoder", "decoder"):
            limits[f"{stack}_token_ids"] = self.config.vocab_size
            groups[f"{stack}_token_ids"] = stack
        if self.padding_mask_input:
            for stack in ("encoder", "decoder"):
                limits[f"{stack}_padding_mask"] = 2
                groups[f"{stack}_padding_mask"] = stack
        return InputContract(
            limits,
            descriptions={name: "vocab_size" for name in limits if name.endswith("_ids")},
            groups=groups,
        )

    def arguments(self):
        return {"application": self.application, "padding_mask_input": self.padding_mask_input}



class T5Version11:
    """What T5 v1.1 computes differently from v1.0 (mixed in before `T5`):
    a gated-GELU feed-forward and an untied head, `Decoder-Output-LM`,
    without v1.0's rescaling."""

    tied_head = False
    default_hidden_act = "gelu_approximate"
    default_feed_forward_gated = True


@register_variant("t5.1.1")
class T5V11(T5Version11, T5):
    """T5 v1.1: T5 (see `T5`) with a gated-GELU feed-forward and an untied
    head, `Decoder-Output-LM`, without v1.0's rescaling.

    https://github.com/google-research/text-to-text-transfer-transformer/blob/main/released_checkpoints.md#t511
    The gating comes from the config (`feed_forward_proj: gated-gelu`, or
    bert4keras's `hidden_act: ["gelu", "linear"]`); a config that does not
    say gets v1.1's gated tanh-approximate GELU.
    """


@register_variant("mt5.1.1")
class MT5(T5Version11, T5):
    """mT5 (Xue et al. 2021, "mT5: A massively multilingual pre-trained
    text-to-text transformer", https://arxiv.org/abs/2010.11934): T5 v1.1's
    structure (see `T5V11`) over a 250k-piece multilingual vocabulary; its
    Mesh TensorFlow checkpoints name the norms `rms_norm`."""


@register_variant("t5_encoder")
class T5Encoder(T5):
    """T5's encoder alone (bert4keras's `t5_encoder`): `token_ids` (and
    `padding_mask` with `padding_mask_input`) in, the encoder's output
    (after `Encoder-Output-Norm`) out, with the layer names of `T5`'s
    encoder, so a T5 or mT5 checkpoint loads into it (its decoder weights
    reported unused)."""

    applications = ("encoder",)
    stack = names.ENCODER

    def __init__(self, config, application="encoder", **kwargs):
        super().__init__(config, application=application, **kwargs)

    def make_input_contract(self):
        limits = {"token_ids": self.config.vocab_size}
        if self.padding_mask_input:
            limits["padding_mask"] = 2
        return InputContract(limits, descriptions={"token_ids": "vocab_size"})

