"""The Gemma configs this builder refuses, each a clear error naming the
key and value. Gemma 1, 2 and 3 against transformers (logits with right
and left padding, greedy and beam generation past the window, the
converter, the encoder) are in tests/models/test_llama_families.py, with
the other LLaMA-layout families."""

import pytest

from keras_attn.models import load_config

COMMON = dict(
    num_hidden_layers=2, intermediate_size=40, bos_token_id=1, eos_token_id=2,
    vocab_size=99, hidden_size=24, num_attention_heads=4, num_key_value_heads=1, head_dim=10,
)
GEMMA2 = dict(COMMON, model_type="gemma2", sliding_window=3)


@pytest.mark.parametrize("fields, message", [
    (dict(GEMMA2, attn_logit_softcapping=0.0),
     r"`attn_logit_softcapping` \(read as `attention_logit_soft_cap`\) must be a number in "
     r"\(0, inf\); received 0.0"),
    (dict(GEMMA2, final_logit_softcapping=-30.0),
     r"`final_logit_softcapping` \(read as `final_logit_soft_cap`\) must be .*received -30.0"),
    (dict(GEMMA2, layer_types=["sliding_attention", "chunked_attention"]),
     r"`layer_types` must be a list of \['sliding_attention', 'full_attention'\]; received "
     r"\['sliding_attention', 'chunked_attention'\]"),
    (dict(GEMMA2, use_bidirectional_attention=True),
     r"`use_bidirectional_attention=True`: this builder reads Gemma's causal decoders"),
    (dict(COMMON, model_type="gemma3_text", sliding_window_pattern=0),
     r"`sliding_window_pattern` must be a positive integer .*received 0"),
    (dict(COMMON, model_type="gemma3_text", rope_parameters={
        "sliding_attention": dict(rope_type="linear", factor=2.0, rope_theta=10.0)}),
     r"\['sliding_attention'\] has rope_type='linear'"),
    (dict(model_type="gemma3", text_config=COMMON),
     r"sets `model_type='gemma3'`; this builder reads \[.*'gemma3_text'.*\] checkpoints"),
])
def test_bad_gemma_configs_are_clear_errors(fields, message):
    with pytest.raises(ValueError, match=message):
        load_config(fields)
