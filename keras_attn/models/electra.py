"""ELECTRA (Clark et al., 2020)."""

import keras
from keras import ops

from keras_attn import layer_names as names
from keras_attn.layers.feed_forward import resolve_activation
from keras_attn.models.registry import register_variant
from keras_attn.models.transformer import Transformer


@register_variant("electra")
class Electra(Transformer):
    """ELECTRA: a BERT encoder whose embeddings may be narrower than its
    blocks, with a replaced-token discriminator or a masked-LM generator.

    Clark, Luong, Le, Manning (2020), "ELECTRA: Pre-training Text Encoders
    as Discriminators Rather Than Generators",
    https://arxiv.org/abs/2003.10555. Embeddings are summed and normalised
    at `embedding_size` and, when it differs from `hidden_size`, mapped to
    it by `Embedding-Mapping` (ELECTRA's `embeddings_project`); the blocks
    are BERT's, one per layer.

    Applications:

    - `"encoder"`: the sequence output (`ElectraModel`).
    - `"discriminator"`: one logit per token, `(batch, length)`, that the
      token was replaced (`ElectraForPreTraining`):
      `w2 . act(W1 h + b1) + b2`, `act` the config's `hidden_act`
      (layers `Discriminator-Dense`, `Discriminator-Prediction`). Logits,
      not probabilities: bert4keras's `with_discriminator=True` builds
      this head (`build_transformer_model(..., model="electra",
      with_discriminator=True)`); apply `keras.ops.sigmoid` for its
      probabilities, or train with a `from_logits=True` loss;
      padding positions carry logits too (weight them out).
    - `"mlm"`: the generator's masked-LM logits (`ElectraForMaskedLM`):
      BERT's head, `Bias(E^T LN(act(W h + b)))` with `W` to
      `embedding_size` and the tied token embedding `E`. Build it with the
      generator's config (its smaller `hidden_size`).

    Checkpoints: Hugging Face `model_type: electra` directories (either
    model), and Google's TensorFlow checkpoints, whose discriminator is
    stored under `electra/` and `discriminator_predictions/` and whose
    generator under `generator/` and `generator_predictions/` (sharing
    `electra/embeddings`): `application="mlm"` reads the generator, the
    other applications the discriminator. A Google checkpoint comes with a
    `bert_config.json`-style config, which names no `model_type`: pass
    `variant="electra"` (bert4keras's `model="electra"`).

    Example:

    ```python
    model = keras_attn.build_transformer_model(
        "electra-small-discriminator", application="discriminator"
    )
    replaced = keras.ops.sigmoid(model({"token_ids": token_ids})) > 0.5
    ```
    """

    applications = ("encoder", "discriminator", "mlm")
    checkpoint_family = "electra"

    def make_head_layers(self):
        head = super().make_head_layers()
        if self.application == "discriminator":
            head["discriminator_dense"] = keras.layers.Dense(
                self.config.hidden_size,
                activation=resolve_activation(self.hidden_act()),
                kernel_initializer=self.initializer(),
                name=names.DISCRIMINATOR_DENSE,
            )
            head["discriminator_prediction"] = keras.layers.Dense(
                1, kernel_initializer=self.initializer(), name=names.DISCRIMINATOR_PREDICTION
            )
        return head

    def apply_final_layers(self, hidden):
        outputs = super().apply_final_layers(hidden)
        if self.application != "discriminator":
            return outputs
        head = self.head_layers
        logits = head["discriminator_prediction"](head["discriminator_dense"](hidden))
        logits = ops.squeeze(logits, axis=-1)
        if not isinstance(outputs, dict):
            return logits
        outputs = {key: value for key, value in outputs.items() if key != "sequence_output"}
        return {**outputs, "discriminator_logits": logits}
