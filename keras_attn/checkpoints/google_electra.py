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

from keras_attn import layer_names as names
from keras_attn.checkpoints import google_bert
from keras_attn.checkpoints.source import Source
from keras_attn.checkpoints.source import tensorflow_dense
from keras_attn.checkpoints.source import tensorflow_layer_norm


def _renamed(source, old, new):
    """`source`'s BERT names (not ALBERT's) with `old` replaced by `new`."""
    renamed = [name.replace(old, new) for name in source.names if name.startswith("bert/")]
    return Source(*renamed[:1], transpose=source.transpose)


# BERT's embeddings, per-layer blocks and pooler (not ALBERT's shared block
# and BERT's heads), by Keras path.
_ENCODER = {
    path: source for path, source in google_bert.NAME_TABLE.entries.items()
    if "{layer}" in path or path.startswith((names.EMBEDDING_LAYERS, names.POOLER))
}
_EMBEDDINGS = {
    path: _renamed(source, "bert/", "electra/")
    for path, source in _ENCODER.items()
    if "/embeddings/" in source.names[0]
}


def _model(scope, head, ignored):
    """The table of the model stored under `scope` (`electra`, `generator`)
    on the shared embeddings, with its `head` entries; `ignored`: the other
    model's names."""
    return google_bert.NAME_TABLE.replace(
        entries={
            **{
                path: _renamed(source, "bert/", f"{scope}/")
                for path, source in _ENCODER.items() if path not in _EMBEDDINGS
            },
            **_EMBEDDINGS,
            **tensorflow_dense(names.EMBEDDING_MAPPING, f"{scope}/embeddings_project"),
            **head,
        },
        ignored=google_bert.NAME_TABLE.ignored + ignored,
    )


DISCRIMINATOR = _model(
    "electra",
    {
        **tensorflow_dense(names.DISCRIMINATOR_DENSE, "discriminator_predictions/dense"),
        **tensorflow_dense(names.DISCRIMINATOR_PREDICTION, "discriminator_predictions/dense_1"),
    },
    ignored=("generator/", "generator_predictions/"),
)

GENERATOR = _model(
    "generator",
    {
        **tensorflow_dense(names.MLM_DENSE, "generator_predictions/dense"),
        **tensorflow_layer_norm(names.MLM_NORM, "generator_predictions/LayerNorm"),
        f"{names.MLM_BIAS}/bias": Source("generator_predictions/output_bias"),
    },
    ignored=(
        "electra/encoder/", "electra/embeddings_project/", "electra/pooler/",
        "discriminator_predictions/",
    ),
)

# The table of each application: the generator is the masked-LM model.
BY_APPLICATION = {"mlm": GENERATOR, "encoder": DISCRIMINATOR, "discriminator": DISCRIMINATOR}
