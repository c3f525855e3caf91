"""The `Transformer` template's input and embedding hooks: the input layers and
the input contract, the token, segment and position embeddings, their sum,
norm and mapping."""

import math

from keras import ops
import keras

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.models.input_contract import InputContract
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import step_of
from keras_attn.models.transformer_block import apply_norm


class EmbeddingHooks:
    """Hooks of `keras_attn.models.transformer.Transformer`, which combines
    this class with the other parts under `keras_attn/models/template/`; the
    methods read the variant's traits and config from `self`, and a variant
    overrides any of them as it overrides a hook of `Transformer`."""

    def make_input_contract(self):
        """What the built model accepts (see `InputContract`); call after
        `build_graph`."""
        config = self.config
        limits = {"token_ids": config.vocab_size}
        descriptions = {"token_ids": "vocab_size"}
        droppable = ()
        if self.uses_segments:
            # The unilm mask tells two segments apart even with one token type.
            segments = 2 if self.mask_mode == "unilm" else 1
            limits["segment_ids"] = max(config.segment_vocab_size, segments)
            descriptions["segment_ids"] = "type_vocab_size"
        else:
            droppable = ("segment_ids",)
        if self.padding_mask_input:
            limits["padding_mask"] = 2
        vectors = {}
        if self.conditional_layer_norm is not None:
            vectors["condition"] = self.conditional_layer_norm
        position = self.embedding_layers["position"]
        return InputContract(
            limits,
            max_length=getattr(position, "max_length", None),
            droppable=droppable,
            descriptions=descriptions,
            vectors=vectors,
        )

    @property
    def uses_segments(self):
        """Whether the model takes `segment_ids` (the unilm mask needs them)."""
        if not self.token_types:
            return False
        return self.config.segment_vocab_size > 1 or self.mask_mode == "unilm"

    @property
    def pad_token_id(self):
        """The token id the main stack reads as padding when no
        `padding_mask` says: the config's, or None for an encoder-decoder's
        decoder (T5's start token is the pad id)."""
        return None if self.application == "seq2seq" else self.config.pad_token_id

    def get_inputs(self):
        if self.application == "seq2seq":
            stacks = ("encoder", "decoder")
            names = [f"{stack}_token_ids" for stack in stacks]
            if self.padding_mask_input:
                names += [f"{stack}_padding_mask" for stack in stacks]
            return {name: keras.Input((None,), dtype="int32", name=name) for name in names}
        inputs = {"token_ids": keras.Input((None,), dtype="int32", name="token_ids")}
        if self.uses_segments:
            inputs["segment_ids"] = keras.Input((None,), dtype="int32", name="segment_ids")
        if self.padding_mask_input:
            inputs["padding_mask"] = keras.Input(
                (None,), dtype="int32", name="padding_mask"
            )
        if self.conditional_layer_norm is not None:
            inputs["condition"] = keras.Input(
                (self.conditional_layer_norm,), dtype="float32", name="condition"
            )
        return inputs

    def inputs_by_name(self, inputs):
        """`inputs` as a dict: a dict (`model.named_inputs`) as it is, a list
        or tuple in the model's input order (`model.inputs`) by position;
        anything else is an error naming both forms."""
        if isinstance(inputs, dict):
            return inputs
        names = list(self.get_inputs())
        if isinstance(inputs, (list, tuple)) and len(inputs) == len(names):
            return dict(zip(names, inputs))
        found = (
            f"a {type(inputs).__name__} of {len(inputs)}"
            if isinstance(inputs, (list, tuple)) else type(inputs).__name__
        )
        raise TypeError(
            f"{type(self).__name__} takes its inputs as a dict with the keys {names} "
            f"(`model.named_inputs`) or a list in that order (`model.inputs`); "
            f"received {found}."
        )

    def make_position_embedding(self):
        """The absolute positions of `position_embedding`
        (`Embedding-Position`), or None."""
        config = self.config
        if self.position_embedding is None:
            return None
        if self.position_embedding == "sinusoidal":
            return layers.SinusoidalPositionEmbedding(
                config.embedding_width, name=names.EMBEDDING_POSITION
            )
        after_padding = {}
        if self.position_embedding == "learned_after_padding":
            after_padding = dict(offset=config.pad_token_id + 1, count_from_padding=True)
        return layers.PositionEmbedding(
            config.max_position,
            config.embedding_width,
            **after_padding,
            hierarchical=config.hierarchical_position,
            embeddings_initializer=self.initializer(),
            name=names.EMBEDDING_POSITION,
        )

    def make_embedding_norm(self):
        """The norm of the summed embeddings (`Embedding-Norm`) with
        `embedding_norm`, else None."""
        return self.layer_norm(names.EMBEDDING_NORM) if self.embedding_norm else None

    def make_embedding_layers(self):
        """The embedding layers, created once so that a variant can embed
        several streams with shared tables (T-TA)."""
        config = self.config
        scale = {"lookup_scale": math.sqrt(config.hidden_size)} if self.embedding_scale else {}
        embedding_layers = {
            "token": layers.TokenEmbedding(
                config.vocab_size,
                config.embedding_width,
                embeddings_initializer=self.initializer(),
                **scale,
                name=names.EMBEDDING_TOKEN,
            ),
            "position": self.make_position_embedding(),
            "norm": self.make_embedding_norm(),
            "dropout": keras.layers.Dropout(config.dropout_rate, name=names.EMBEDDING_DROPOUT),
        }
        if config.hierarchical_position and not getattr(
            embedding_layers["position"], "hierarchical", False
        ):
            raise ValueError(
                f"hierarchical_position={config.hierarchical_position!r} needs a learned "
                f"absolute position table, which {type(self).__name__} does not have."
            )
        if config.segment_vocab_size > 0 and self.token_types:
            embedding_layers["segment"] = keras.layers.Embedding(
                config.segment_vocab_size,
                config.embedding_width,
                embeddings_initializer=self.initializer(),
                name=names.EMBEDDING_SEGMENT,
            )
        if config.embedding_width != config.hidden_size:
            embedding_layers["mapping"] = keras.layers.Dense(
                config.hidden_size,
                use_bias=self.use_bias,
                kernel_initializer=self.initializer(),
                name=names.EMBEDDING_MAPPING,
            )
        return embedding_layers

    def embedding_parts(self):
        """The roles of the embeddings `embed` adds: `token`, `segment`,
        `position`, those the model has."""
        return [
            role for role in ("token", "segment", "position")
            if self.embedding_layers.get(role) is not None
        ]

    def embedding_add(self, stream=""):
        """The `Add` of the embeddings of `stream` (`Embedding-Add{stream}`),
        created with the other layers for the main stream, on first use for a
        variant's second stream (T-TA's queries)."""
        if stream not in self.embedding_adds:
            self.embedding_adds[stream] = self.own(
                keras.layers.Add(name=names.embedding_add(stream))
            )
        return self.embedding_adds[stream]

    def embedding_mask(self, stream="", name=None):
        """The `OutputMask` (`Embedding-Mask{stream}`) that puts the padding
        on the summed embeddings as their Keras mask, which every later layer
        carries (put after the sum: Keras' `Add` drops a partial mask)."""
        name = name or names.embedding_mask(stream)
        masks = vars(self).setdefault("embedding_masks", {})
        if name not in masks:
            masks[name] = self.own(layers.OutputMask(name=name))
        return masks[name]

    def apply_embeddings(self, inputs):
        inputs = self.stream_inputs(inputs)
        return self.embed(
            inputs["token_ids"],
            inputs.get("segment_ids"),
            inputs.get("padding_mask"),
            condition=self.condition,
        )

    def embed(self, token_ids, segment_ids=None, padding_mask=None, stream="",
              condition=None, step=FULL_PASS, cache_step=None):
        """`Mapping(Dropout(LN(token + segment + position)))`, the mapping only
        for factorised embeddings, in the pass `step` (`FULL_PASS` or a
        `DecodeStep`; `cache_step` is its deprecated spelling); `stream`
        suffixes a second stream's parameter-free layer names."""
        step = step_of(step, cache_step)
        config = self.config
        embedding_layers = self.embedding_layers
        run = step.run
        padding_mask = step.real_tokens(token_ids, self.pad_token_id, padding_mask)
        embedded = [run(embedding_layers["token"], token_ids)]
        if "segment" in embedding_layers:
            if segment_ids is None or config.segment_vocab_size == 1:
                # A single token type (RoBERTa) still has its embedding row.
                segment_ids = ops.zeros_like(token_ids)
            embedded.append(run(embedding_layers["segment"], segment_ids))
        position = embedding_layers["position"]
        if position is not None:
            embedded.append(step.positions(position, token_ids, padding_mask))
        hidden = embedded[0]
        if len(embedded) > 1:
            hidden = run(self.embedding_add(stream), embedded)
        hidden = step.mask(self.embedding_mask(stream), hidden, padding_mask)
        if embedding_layers["norm"] is not None:
            hidden = apply_norm(embedding_layers["norm"], hidden, condition, run)
        hidden = step.dropout(embedding_layers["dropout"], hidden)
        if "mapping" in embedding_layers:
            hidden = run(embedding_layers["mapping"], hidden)
        return hidden
