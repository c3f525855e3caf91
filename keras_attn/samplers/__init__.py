"""Token samplers for generation: `sampler(logits, seed)` -> token ids."""

import keras

from keras_attn.samplers.beam_search import BeamSearch
from keras_attn.samplers.greedy_sampler import GreedySampler
from keras_attn.samplers.random_sampler import RandomSampler
from keras_attn.samplers.sampler import Sampler
from keras_attn.samplers.top_k_sampler import TopKSampler
from keras_attn.samplers.top_p_sampler import TopPSampler

__all__ = [
    "BeamSearch",
    "GreedySampler",
    "RandomSampler",
    "Sampler",
    "TopKSampler",
    "TopPSampler",
    "get",
]

_BY_NAME = {
    "greedy": GreedySampler,
    "random": RandomSampler,
    "top_k": lambda: TopKSampler(k=5),
    "top_p": lambda: TopPSampler(p=0.9),
    "beam": lambda: BeamSearch(num_beams=4),
}
_CLASSES = (Sampler, GreedySampler, RandomSampler, TopKSampler, TopPSampler, BeamSearch)


def get(identifier):
    """A `Sampler` (or `BeamSearch`) from `identifier`:

    - a `Sampler` or `BeamSearch` instance, returned as is;
    - a name: `"greedy"`, `"random"` (temperature 1), `"top_k"`
      (`TopKSampler(k=5)`), `"top_p"` (`TopPSampler(p=0.9)`, no top-k cut),
      `"beam"` (`BeamSearch(num_beams=4)`);
    - a config dict as `keras.saving.serialize_keras_object(sampler)`
      writes it (`{"class_name": "TopKSampler", "config": {"k": 10, ...}}`).

    Anything else raises a ValueError that lists the accepted names.
    """
    if isinstance(identifier, (Sampler, BeamSearch)):
        return identifier
    if isinstance(identifier, str) and identifier in _BY_NAME:
        return _BY_NAME[identifier]()
    if isinstance(identifier, dict):
        try:
            sampler = keras.saving.deserialize_keras_object(
                identifier, module_objects={cls.__name__: cls for cls in _CLASSES}
            )
        except (TypeError, ValueError) as error:
            raise ValueError(f"Cannot build a sampler from the config {identifier!r}: {error}") from error
        if isinstance(sampler, (Sampler, BeamSearch)):
            return sampler
    raise ValueError(
        f"Unknown sampler {identifier!r}: expected a Sampler, one of the names "
        f"{sorted(_BY_NAME)}, or a config dict such as "
        "{'class_name': 'TopKSampler', 'config': {'k': 10}}."
    )
