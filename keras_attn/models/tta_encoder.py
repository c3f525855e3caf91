"""`TTAEncoder`: a T-TA model usable on its own, without a config file."""

import keras

from keras_attn.models.transformer_config import TransformerConfig
from keras_attn.models.transformer_model import TransformerModel
from keras_attn.models.tta import Tta


# Constructor arguments, and the config fields whose names differ.
_ARGUMENTS = (
    "vocab_size", "hidden_size", "num_layers", "num_heads", "intermediate_size",
    "mask_token_id", "max_position", "pad_token_id", "dropout_rate",
    "attention_dropout_rate", "diagonal_mask", "naive_key_value",
)
_CONFIG_FIELDS = {"diagonal_mask": "tta_diagonal_mask", "naive_key_value": "tta_naive_key_value"}


@keras.saving.register_keras_serializable(package="keras_attn")
class TTAEncoder(TransformerModel):
    """A T-TA language model (see `keras_attn.models.Tta`) as a `keras.Model`.

    Takes `{"token_ids": (batch, length)}` and returns tied-embedding logits
    `(batch, length, vocab_size)` predicting every token from all the others
    in one pass; train it with `keras_attn.TokenCrossEntropy(ignore_id=pad_token_id)`
    and the inputs as targets. The same as
    `build_transformer_model(config, variant="tta", application="mlm")`, with
    the configuration given as arguments and kept by `get_config`, so `.keras`
    files round-trip.

    Args:
        vocab_size, hidden_size, num_layers, num_heads, intermediate_size:
            the model's size.
        mask_token_id: the [MASK] id the query stream starts from.
        max_position: rows of the learned position table.
        pad_token_id: the padding id.
        dropout_rate, attention_dropout_rate: dropout rates.
        diagonal_mask: mask the diagonal (pretraining); `False` for fine-tuning.
        naive_key_value: the leaking ablation (keys/values from the previous
            layer); for experiments only.
        **kwargs: `keras.Model` arguments (`name`).

    Example:

    >>> model = keras_attn.TTAEncoder(vocab_size=100, hidden_size=64, num_layers=3,
    ...                               num_heads=4, intermediate_size=128, mask_token_id=4)
    >>> model.compile("adam", loss=keras_attn.TokenCrossEntropy(ignore_id=0))
    """

    def __init__(
        self,
        vocab_size,
        hidden_size,
        num_layers,
        num_heads,
        intermediate_size,
        mask_token_id,
        max_position=512,
        pad_token_id=0,
        dropout_rate=0.1,
        attention_dropout_rate=0.1,
        diagonal_mask=True,
        naive_key_value=False,
        **kwargs,
    ):
        self._arguments = {
            name: value for name, value in locals().items() if name in _ARGUMENTS
        }
        config = TransformerConfig(
            **{_CONFIG_FIELDS.get(name, name): value for name, value in self._arguments.items()}
        )
        template = Tta(config, application="mlm")
        inputs, outputs = template.build_graph()
        super().__init__(
            inputs, outputs, input_contract=template.make_input_contract(), **kwargs
        )

    def get_config(self):
        return dict(self._arguments, name=self.name)

    @classmethod
    def from_config(cls, config):
        return cls(**config)
