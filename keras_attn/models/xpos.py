"""Causal LM with XPOS rotary encodings."""

from keras_attn.models.roformer import Roformer


class Xpos(Roformer):
    """Rotary embeddings with XPOS's exponential decay (Sun et al., 2023,
    "A Length-Extrapolatable Transformer", https://arxiv.org/abs/2212.10554).
    XPOS is defined for causal attention, so this variant requires
    `application="lm"`. Its blockwise causal attention is the override pair
    `attention_window=block, blockwise_attention=True`."""

    position_encoding = "xpos"

    def __init__(self, config, application="lm", **kwargs):
        if application != "lm":
            raise ValueError(
                f"variant='xpos' is for causal language models (application='lm'); "
                f"received application={application!r}."
            )
        super().__init__(config, application=application, **kwargs)
