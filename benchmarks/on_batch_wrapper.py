"""Where JAX's `predict_on_batch`/`train_on_batch` time goes: keras_attn's
BERT-base (a `TransformerModel`), the same model through Keras' own
`*_on_batch` (`keras.Model.predict_on_batch(model, x)`, without
`TransformerModel`'s wrapper: input checks, `_keeping_weights`) and
keras-hub's `BertBackbone`, side by side, with pieces of the wrapper timed
apart; medians of 20 calls after 3. Prints its rows (issue 50, item 5).

    KERAS_BACKEND=jax .venv/bin/python benchmarks/on_batch_wrapper.py

`DIAG_DTYPE` sets the dtype policy (default bfloat16); `DIAG_SMALL=1` runs a
2-layer model of width 64 (a quick check that the script runs)."""
import os
import statistics
import time

os.environ.setdefault("KERAS_BACKEND", "jax")
import numpy as np  # noqa: E402
import keras  # noqa: E402
import jax  # noqa: E402
import keras_attn  # noqa: E402
import keras_hub  # noqa: E402

small = bool(os.environ.get("DIAG_SMALL"))
keras.config.set_dtype_policy(os.environ.get("DIAG_DTYPE", "bfloat16"))
if small:
    cfg = dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
               intermediate_size=128, max_position_embeddings=512)
else:
    cfg = dict(vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
               intermediate_size=3072, max_position_embeddings=512)
ours = keras_attn.build_transformer_model(cfg, dropout_rate=0.1)
backbone = keras_hub.models.BertBackbone(
    vocabulary_size=cfg["vocab_size"], num_layers=cfg["num_hidden_layers"],
    num_heads=cfg["num_attention_heads"], hidden_dim=cfg["hidden_size"],
    intermediate_dim=cfg["intermediate_size"], max_sequence_length=512)
hub = keras.Model(backbone.input, backbone.output["sequence_output"])
for model in (ours, hub):
    model.compile(optimizer=keras.optimizers.AdamW(1e-5), loss="mse", jit_compile=True)
print("devices", jax.devices(), "variables", len(ours.variables), len(hub.variables),
      "layers", len(list(ours._flatten_layers())), len(list(hub._flatten_layers())), flush=True)
rng = np.random.default_rng(0)


def data(batch, length, padding):
    tokens = rng.integers(5, cfg["vocab_size"] - 1, size=(batch, length)).astype("int32")
    inputs = {"token_ids": tokens, "segment_ids": np.zeros_like(tokens)}
    if padding:
        inputs["padding_mask"] = np.ones_like(tokens)
    return inputs


def median_ms(function, repeats=20):
    for _ in range(3):
        function()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        function()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def keeping():
    with ours._keeping_weights():
        pass


for batch, length in [(8, 128), (2, 512)]:
    mine, theirs = data(batch, length, False), data(batch, length, True)
    target = np.zeros((batch, length, cfg["hidden_size"]), "float32")
    out_ours, out_hub = ours.predict_on_batch(mine), hub.predict_on_batch(theirs)
    print(f"{batch}x{length} outputs: ours {type(out_ours).__name__} {out_ours.dtype} {out_ours.shape},"
          f" keras-hub {type(out_hub).__name__} {out_hub.dtype} {out_hub.shape}", flush=True)
    rows = {
        "ours predict_on_batch": lambda: ours.predict_on_batch(mine),
        "ours keras.Model.predict_on_batch": lambda: keras.Model.predict_on_batch(ours, mine),
        "keras-hub predict_on_batch": lambda: hub.predict_on_batch(theirs),
        "ours _checked": lambda: ours._checked(mine),
        "ours _keeping_weights": keeping,
        "ours list(variables)": lambda: list(ours.variables),
        "keras-hub list(variables)": lambda: list(hub.variables),
        "ours train_on_batch": lambda: ours.train_on_batch(mine, target),
        "ours keras.Model.train_on_batch": lambda: keras.Model.train_on_batch(ours, mine, target),
        "keras-hub train_on_batch": lambda: hub.train_on_batch(theirs, target),
    }
    for name, function in rows.items():
        print(f"{batch}x{length} {name:40s} {median_ms(function):8.3f} ms", flush=True)
