"""The `Transformer` template's output hooks: the final norm and dropout, the
pooler, the next-sentence and language-model heads, and the output masks."""

import keras

from keras_attn import layer_names as names
from keras_attn import layers
from keras_attn.layers import masking
from keras_attn.layers.feed_forward import resolve_activation
from keras_attn.models.passes import FULL_PASS
from keras_attn.models.passes import step_of
from keras_attn.models.transformer_block import apply_norm


class HeadHooks:
    """Hooks of `keras_attn.models.transformer.Transformer`, which combines
    this class with the other parts under `keras_attn/models/template/`; the
    methods read the variant's traits and config from `self`, and a variant
    overrides any of them as it overrides a hook of `Transformer`."""

    def make_output_norm(self):
        """The norm after the last block (`Output-Norm`, GPT-2's `ln_f`)
        with `final_norm`, else None."""
        return self.layer_norm(names.OUTPUT_NORM) if self.final_norm else None

    def make_output_dropout(self):
        """The dropout after `make_output_norm`'s norm (`Output-Dropout`)."""
        return keras.layers.Dropout(self.config.dropout_rate, name=names.OUTPUT_DROPOUT)

    def make_head_layers(self):
        """The layers after the blocks, by role: `pooler` and `nsp` (with
        `with_pool`/`with_nsp`), and the masked-LM head (`mlm_dense`,
        `mlm_norm`, `mlm_decoder` for an untied decoder, `mlm_bias`)."""
        config = self.config
        head = {}
        if self.with_pool:
            head["pooler"] = keras.layers.Dense(
                config.hidden_size,
                activation=self.pool_activation,
                kernel_initializer=self.initializer(),
                name=names.POOLER,
            )
            if self.with_nsp:
                head["nsp"] = keras.layers.Dense(
                    2, kernel_initializer=self.initializer(), name=names.NSP
                )
        if self.with_mlm and self.head == "embedding":
            head.update(self.make_embedding_head_layers())
        elif self.with_mlm:
            head["mlm_dense"] = keras.layers.Dense(
                config.embedding_width,
                activation=resolve_activation(self.hidden_act()),
                use_bias=self.mlm_dense_bias,
                kernel_initializer=self.initializer(),
                name=names.MLM_DENSE,
            )
            head["mlm_norm"] = self.layer_norm(names.MLM_NORM)
            if not config.tie_word_embeddings:
                # `tie_word_embeddings: false`: the checkpoint's own decoder.
                head["mlm_decoder"] = keras.layers.Dense(
                    config.vocab_size,
                    use_bias=False,
                    kernel_initializer=self.initializer(),
                    name=names.MLM_DECODER,
                )
            head["mlm_bias"] = layers.BiasAdd(name=names.MLM_BIAS)
        cap = self.config.final_logit_soft_cap
        if self.with_mlm and self.logit_soft_caps and cap is not None:
            head["soft_cap"] = layers.LogitSoftCap(cap, name=names.MLM_SOFT_CAP)
        return head

    def make_embedding_head_layers(self):
        """The `embedding` head's layers: the checkpoint's own projection
        (`MLM-Decoder`, no bias) with `tie_word_embeddings: false`, else,
        for factorised embeddings, `Output-Mapping` back to
        `embedding_size` before the tied token embedding."""
        config = self.config
        if not config.tie_word_embeddings:
            role, width, name = "lm_decoder", config.vocab_size, names.MLM_DECODER
        elif config.embedding_width != config.hidden_size:
            role, width, name = "output_mapping", config.embedding_width, names.OUTPUT_MAPPING
        else:
            return {}
        dense = keras.layers.Dense(
            width, use_bias=False, kernel_initializer=self.initializer(), name=name
        )
        return {role: dense}

    def language_model_head(self, hidden, condition=None, step=FULL_PASS, cache_step=None):
        """The language-model logits of `hidden`, by `head`: `transform`,
        `Bias(Decoder(LN(Dense(h))))`; `embedding`, `Decoder(h)` (or
        `(h W_out) E^T` for factorised embeddings); the decoder the token
        embedding transposed unless untied. With `logit_soft_caps` and the
        config's `final_logit_soft_cap` `c`, the logits are `c tanh(x / c)`.
        `step` is the pass (`FULL_PASS` or a `DecodeStep`; `cache_step` its
        deprecated spelling)."""
        head = self.head_layers
        run = step_of(step, cache_step).run
        if self.head == "transform":
            hidden = apply_norm(head["mlm_norm"], run(head["mlm_dense"], hidden), condition, run)
        elif "output_mapping" in head:
            hidden = run(head["output_mapping"], hidden)
        decoder = head.get("mlm_decoder", head.get("lm_decoder"))
        if decoder is not None:
            logits = run(decoder, hidden)
        else:
            logits = run(self.embedding_layers["token"], hidden, reverse=True)
        if "mlm_bias" in head:
            logits = run(head["mlm_bias"], logits)
        if "soft_cap" in head:
            logits = run(head["soft_cap"], logits)
        return logits

    def apply_final_layers(self, hidden):
        head = self.head_layers
        outputs = {"sequence_output": hidden}
        if self.with_pool:
            pooled = head["pooler"](hidden[:, 0])
            outputs["pooled_output"] = pooled
            if self.with_nsp:
                outputs["nsp_logits"] = head["nsp"](pooled)
        if self.with_mlm:
            outputs["mlm_logits"] = self.language_model_head(hidden, self.condition)
            del outputs["sequence_output"]
        if len(outputs) == 1:
            return next(iter(outputs.values()))
        return outputs

    def mask_sequence_outputs(self, inputs, outputs):
        """`outputs` with a Keras mask on each `(batch, length, ...)` one: the
        padding (`padding_mask`, else `token_ids != pad_token_id`), for the
        mask-consuming layers users stack on the model."""
        padding_mask = masking.real_tokens(
            inputs["token_ids"], self.pad_token_id, inputs.get("padding_mask")
        )
        single = not isinstance(outputs, dict)
        named = {"output": outputs} if single else outputs
        masked = {
            name: self.prefixed(
                layers.OutputMask(name=names.OUTPUT_MASKS.get(name, f"{name}-Mask"))
            )(value, mask=padding_mask)
            if len(value.shape) == 3
            else value
            for name, value in named.items()
        }
        return masked["output"] if single else masked
