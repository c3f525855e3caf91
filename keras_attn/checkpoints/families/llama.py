"""LLaMA's checkpoints (Hugging Face `model_type: llama`), and the config
reading that Mistral, Qwen2 and Qwen3, which store the same names, share
(`families.mistral`, `families.qwen2`, `families.qwen3`)."""

import dataclasses

from keras_attn.checkpoints import huggingface_llama
from keras_attn.checkpoints.families.family import ENCODER_REFERENCE
from keras_attn.checkpoints.families.family import CheckpointFamily
from keras_attn.checkpoints.families.family import LM_REFERENCE
from keras_attn.checkpoints.families.family import Marker
from keras_attn.checkpoints.families.family import name_tables
from keras_attn.checkpoints.families.family import set_defaults

# LlamaConfig's spellings (and its siblings').
CONFIG_ALIASES = {
    "rms_norm_eps": "layer_norm_epsilon",
    "head_dim": "attention_head_size",
    "attention_dropout": "attention_dropout_rate",
}

# Fields of these configs that do not change the network this builder makes.
IGNORED_KEYS = frozenset({
    # LLaMA's tensor-parallel pretraining: transformers 5 no longer reads it.
    "pretraining_tp",
})

# What transformers compares a LLaMA-layout model with.
REFERENCES = {**LM_REFERENCE, **ENCODER_REFERENCE}

NAME_TABLES = name_tables(huggingface_llama.NAME_TABLE)


def prepare_config(values, model_type):
    """What every LLaMA-layout config shares: transformers never reads a
    token id as padding (the `attention_mask` says), so `pad_token_id` is
    left out, as GPT-2's missing one is; `head_dim: null` is `hidden_size /
    num_attention_heads`."""
    values = dict(values)
    values.pop("pad_token_id", None)
    if values.get("head_dim", 0) is None:
        del values["head_dim"]
    return values


def defaults(max_position):
    """The `config_defaults` of a family whose configs default
    `max_position_embeddings` to `max_position`: the values transformers'
    config classes give what a `config.json` leaves out."""
    return set_defaults({
        "pad_token_id": None,
        "segment_vocab_size": 0,
        "dropout_rate": 0.0,
        "attention_dropout_rate": 0.0,
        "layer_norm_epsilon": 1e-6,
        "tie_word_embeddings": False,
        "hidden_act": "silu",
        "max_position": max_position,
    })


LLAMA = CheckpointFamily(
    name="llama",
    title="LLaMA",
    description="LLaMA's (Hugging Face `model_type: llama`: `model.layers.{i}.self_attn."
    "q_proj`, ..., RMS norms, a gated SiLU feed-forward)",
    model_types=("llama",),
    config_aliases=CONFIG_ALIASES,
    prepare_config=prepare_config,
    config_defaults=defaults(2048),
    ignored_keys=IGNORED_KEYS,
    default_variant="llama",
    name_tables=NAME_TABLES,
    markers=(Marker("self_attn.q_proj", "'llama', 'mistral', 'qwen2' or 'qwen3'", kind="shared"),),
    references=REFERENCES,
    variant_modules=("llama",),
)


def derived(name, **differences):
    """The declaration of a family that stores LLaMA's names (Mistral,
    Qwen2, Qwen3, Gemma, Phi-3): LLaMA's config spellings, ignored keys,
    name tables and transformers references, with `differences` (its
    title, config reading, ...). The `model_types` and the default variant
    are `name` unless given, and so is the one module of its variants; no
    marker unless given (LLaMA's names already say "one of these")."""
    defaults = {
        "model_types": (name,), "default_variant": name, "markers": (),
        "variant_modules": (name,),
    }
    return dataclasses.replace(LLAMA, name=name, **{**defaults, **differences})
