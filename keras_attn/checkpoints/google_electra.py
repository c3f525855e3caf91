"""Name tables: Google's TensorFlow ELECTRA checkpoints onto this library's
variables, one for the discriminator and one for the generator.

ELECTRA's pretraining checkpoint holds both models. They share the
embeddings (`electra/embeddings/...`); the discriminator's projection and
blocks are BERT's Google names under `electra/` instead of `bert/`
(`electra/embeddings_project`, `electra/encoder/layer_{i}/...`) and its
head is `discriminator_predictions/dense` then `dense_1`; the generator's
are under `generator/` and `generator_predictions/` (dense, LayerNorm,
`output_bias`; the decoder is the tied token embedding). bert4keras's
ELECTRA reads the discriminator's names. Kernels are `(in, out)`, as in
Keras.
"""

from types import SimpleNamespace

from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source


def _renamed(source, old, new):
    """`source`'s BERT names (not ALBERT's) with `old` replaced by `new`."""
    names = [name.replace(old, new) for name in source.names if name.startswith("bert/")]
    return Source(*names[:1], transpose=source.transpose)


# BERT's embeddings, per-layer blocks and pooler (not ALBERT's shared block
# and BERT's heads), by Keras path.
_ENCODER = {
    path: source for path, source in google_bert.TABLE.items()
    if "{layer}" in path or path.startswith(("Embedding-", "Pooler-"))
}
_EMBEDDINGS = {
    path: _renamed(source, "bert/", "electra/")
    for path, source in _ENCODER.items()
    if "/embeddings/" in source.names[0]
}


def _model(scope):
    """The encoder of the model stored under `scope` (`electra`,
    `generator`), on the shared embeddings."""
    return {
        **{
            path: _renamed(source, "bert/", f"{scope}/")
            for path, source in _ENCODER.items() if path not in _EMBEDDINGS
        },
        **_EMBEDDINGS,
        "Embedding-Mapping/kernel": Source(f"{scope}/embeddings_project/kernel"),
        "Embedding-Mapping/bias": Source(f"{scope}/embeddings_project/bias"),
    }


DISCRIMINATOR = SimpleNamespace(
    TABLE={
        **_model("electra"),
        "Discriminator-Dense/kernel": Source("discriminator_predictions/dense/kernel"),
        "Discriminator-Dense/bias": Source("discriminator_predictions/dense/bias"),
        "Discriminator-Prediction/kernel": Source("discriminator_predictions/dense_1/kernel"),
        "Discriminator-Prediction/bias": Source("discriminator_predictions/dense_1/bias"),
    },
    # The generator's weights, stored beside the discriminator's.
    IGNORED=google_bert.IGNORED + ("generator/", "generator_predictions/"),
    DUPLICATES={},
    candidates=google_bert.candidates,
)

GENERATOR = SimpleNamespace(
    TABLE={
        **_model("generator"),
        "MLM-Dense/kernel": Source("generator_predictions/dense/kernel"),
        "MLM-Dense/bias": Source("generator_predictions/dense/bias"),
        "MLM-Norm/gamma": Source("generator_predictions/LayerNorm/gamma"),
        "MLM-Norm/beta": Source("generator_predictions/LayerNorm/beta"),
        "MLM-Bias/bias": Source("generator_predictions/output_bias"),
    },
    # The discriminator's weights, stored beside the generator's.
    IGNORED=google_bert.IGNORED + (
        "electra/encoder/", "electra/embeddings_project/", "electra/pooler/",
        "discriminator_predictions/",
    ),
    DUPLICATES={},
    candidates=google_bert.candidates,
)

# The table of each application: the generator is the masked-LM model.
BY_APPLICATION = {"mlm": GENERATOR, "encoder": DISCRIMINATOR, "discriminator": DISCRIMINATOR}
