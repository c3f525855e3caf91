"""T-TA against a masked LM and a causal LM of the same size, on characters.

Shin, Lee, Jung (2020), "Fast and Accurate Deep Bidirectional Language
Representations for Unsupervised Learning": T-TA predicts every token from
all the others in one pass, so every token is a training target (a masked LM
trains on ~15%) and a sentence's pseudo-log-likelihood costs one pass instead
of n. Three models of the same size (3 layers, hidden 64, 4 heads) train for
the same wall-clock budget on characters of the standard library's source:

- T-TA (all-token objective),
- a BERT-style masked LM (15% of characters replaced by [MASK]),
- a causal LM (next character).

Reported: supervised tokens per second, held-out loss against wall-clock
time (each model on its own objective), the cost of scoring pseudo-log-
likelihoods (one T-TA pass against n masked-LM passes), and T-TA's two
ablations: no diagonal mask (the model can copy its input; the loss
collapses) and naive deep keys/values (the prediction leaks its own token).

    KERAS_BACKEND=jax python examples/tta_vs_mlm.py [--quick]

Writes tta_vs_mlm.{json,png} to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="a few seconds per model")
    parser.add_argument("--budget", type=float, default=90.0, help="training seconds per model")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, source_characters, windows, write_results  # noqa: E402

LENGTH = 64
MASK_ID, PAD_ID = 1, 0


def config(vocabulary_size, **changes):
    return dict(
        vocab_size=vocabulary_size, hidden_size=64, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=128, max_position_embeddings=LENGTH,
        type_vocab_size=0, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        mask_token_id=MASK_ID, **changes,
    )


def mlm_batch(rows, rng, rate=0.15):
    chosen = rng.random(rows.shape) < rate
    inputs = np.where(chosen, MASK_ID, rows).astype("int32")
    targets = np.where(chosen, rows, PAD_ID).astype("int32")
    return inputs, targets


def batch_for(kind, rows, rng):
    """(inputs, targets, number of supervised tokens) of one batch."""
    if kind == "mlm":
        inputs, targets = mlm_batch(rows, rng)
    elif kind == "lm":
        inputs, targets = rows[:, :-1], rows[:, 1:]
    else:
        inputs, targets = rows, rows
    return {"token_ids": inputs}, targets, int((targets != PAD_ID).sum())


def build(kind, vocabulary_size, **changes):
    if kind == "lm":
        return keras_attn.build_transformer_model(config(vocabulary_size, **changes), application="lm")
    if kind == "mlm":
        return keras_attn.build_transformer_model(config(vocabulary_size, **changes), application="mlm")
    return keras_attn.build_transformer_model(
        config(vocabulary_size, **changes), variant="tta", application="mlm"
    )


def train(kind, train_rows, test_rows, vocabulary_size, budget, batch_size=32, **changes):
    keras.utils.set_random_seed(0)
    rng = np.random.default_rng(0)
    model = build(kind, vocabulary_size, **changes)
    model.compile(
        optimizer=keras.optimizers.Adam(2e-3),
        loss=keras_attn.TokenCrossEntropy(ignore_id=PAD_ID),
        jit_compile=keras.config.backend() != "torch",
    )
    test_inputs, test_targets, _ = batch_for(kind, test_rows, np.random.default_rng(1))
    # One step to compile, outside the clock.
    inputs, targets, _ = batch_for(kind, train_rows[:batch_size], rng)
    model.train_on_batch(inputs, targets)
    curve, supervised, elapsed, step = [], 0, 0.0, 0
    next_evaluation = 0.0
    while elapsed < budget:
        if elapsed >= next_evaluation:
            loss = model.evaluate(test_inputs, test_targets, batch_size=128, verbose=0)
            curve.append((elapsed, float(loss)))
            next_evaluation += budget / 12
        start = (step * batch_size) % (len(train_rows) - batch_size)
        inputs, targets, count = batch_for(kind, train_rows[start : start + batch_size], rng)
        begin = time.perf_counter()
        model.train_on_batch(inputs, targets)
        elapsed += time.perf_counter() - begin
        supervised += count
        step += 1
    loss = model.evaluate(test_inputs, test_targets, batch_size=128, verbose=0)
    curve.append((elapsed, float(loss)))
    return model, {
        "steps": step,
        "training_seconds": elapsed,
        "supervised_tokens_per_second": supervised / elapsed,
        "final_test_loss": float(loss),
        "curve": curve,
    }


def pseudo_log_likelihood_seconds(tta, mlm, rows):
    """Time to score every position of `rows`: one T-TA pass, against one
    masked-LM pass per position."""
    tokens = {"token_ids": rows}
    tta.predict(tokens, verbose=0)  # compile
    with Timer() as tta_timer:
        tta.predict(tokens, batch_size=len(rows), verbose=0)
    masked = [np.where(np.arange(LENGTH) == i, MASK_ID, rows).astype("int32") for i in range(LENGTH)]
    mlm.predict({"token_ids": masked[0]}, verbose=0)
    with Timer() as mlm_timer:
        for batch in masked:
            mlm.predict({"token_ids": batch}, batch_size=len(rows), verbose=0)
    return tta_timer.seconds, mlm_timer.seconds


def main(arguments):
    budget = 2.0 if arguments.quick else arguments.budget

    ids, vocabulary = source_characters()
    rows = windows(ids, LENGTH)
    test_rows, train_rows = rows[:256], rows[256:]
    print(f"backend={keras.config.backend()}: {len(train_rows)} training windows of {LENGTH} characters")

    results, curves, models = {}, {}, {}
    for kind, label in (("tta", "T-TA"), ("mlm", "masked LM (15%)"), ("lm", "causal LM")):
        models[kind], results[label] = train(kind, train_rows, test_rows, len(vocabulary), budget)
        curves[label] = tuple(zip(*results[label]["curve"]))
        print(
            f"{label:<16} {results[label]['supervised_tokens_per_second']:>9,.0f} supervised tokens/s  "
            f"test loss {results[label]['final_test_loss']:.3f}  ({results[label]['steps']} steps)"
        )
    ratio = (
        results["T-TA"]["supervised_tokens_per_second"]
        / results["masked LM (15%)"]["supervised_tokens_per_second"]
    )
    print(f"T-TA supervises {ratio:.1f}x more tokens per second than the masked LM")

    tta_seconds, mlm_seconds = pseudo_log_likelihood_seconds(models["tta"], models["mlm"], test_rows[:32])
    print(
        f"pseudo-log-likelihood of 32 x {LENGTH} characters: T-TA {tta_seconds * 1000:.0f} ms "
        f"(1 pass), masked LM {mlm_seconds * 1000:.0f} ms ({LENGTH} passes)"
    )

    ablations = {}
    for label, changes in (
        ("no diagonal mask", {"tta_diagonal_mask": False}),
        ("naive deep keys/values", {"tta_naive_key_value": True}),
    ):
        _, outcome = train("tta", train_rows, test_rows, len(vocabulary), budget / 2, **changes)
        ablations[label] = outcome["final_test_loss"]
        print(f"T-TA ablation, {label:<24} test loss {outcome['final_test_loss']:.3f} (copying/leaking)")

    results["tta_over_mlm_supervised_tokens_ratio"] = ratio
    results["pseudo_log_likelihood_ms"] = {"tta": tta_seconds * 1000, "mlm": mlm_seconds * 1000}
    results["ablations_final_test_loss"] = ablations
    results["_meta"] = {"backend": keras.config.backend(), "budget_seconds": budget}
    write_results(
        "tta_vs_mlm", results, curves, xlabel="training seconds", ylabel="held-out loss (nats/char)",
        directory=arguments.output,
    )


if __name__ == "__main__":
    main(ARGUMENTS)
