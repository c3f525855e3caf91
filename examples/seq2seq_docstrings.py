"""Generation: a UniLM writes docstring summaries; a windowed LM runs 8x past its training length.

1. Seq2seq in the spirit of bert4keras's `task_seq2seq_autotitle`, offline:
   the source is a function's signature from the standard library's own
   source (`Queue.put(item, block, timeout)`, read with `ast`, tests
   excluded), the target the first line of its docstring ("Put an item
   into the queue."). A WordPiece vocabulary is learned from the training
   pairs, a small `unilm` RoFormer is trained with `fit` and
   `keras_attn.TokenCrossEntropy` on the target tokens only (segment ids
   0/1, the UniLM mask), and whole standard-library modules are held out
   (`email`, `json`, ... never seen in training). The held-out signatures
   are decoded with `model.generate` by greedy search, seeded top-p
   sampling and beam search, and scored against the real summaries: word
   F1, ROUGE-L and exact match (all written below), beside a
   nearest-neighbour baseline that copies the summary of the training
   signature sharing the most words.

2. A character language model (`lm`, RoFormer) trained on docstring text
   in windows of 64 characters, then run on 512 (8x): the held-out
   per-character log-likelihood by position with `attention_window=64`
   (the LocalMaskBaseline) against full attention, and a continuation of
   448 characters generated with the windowed cache, whose size stays 64
   keys per layer however long the generation.

    KERAS_BACKEND=jax python examples/seq2seq_docstrings.py [--quick]

Writes seq2seq_docstrings.{json,png} to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="small data, one epoch, 4x the training length")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, compile_model, docstring_lines, nearest_neighbour, score  # noqa: E402
from common import signature_docstring_pairs, split_by_module  # noqa: E402
from common import train_vocabulary, unilm_targets, windows, write_results  # noqa: E402
from keras_attn.generation import CachedForward  # noqa: E402

MAXLEN = 48  # [CLS] signature [SEP] summary [SEP]
SOURCE_MAXLEN = 24
MAX_NEW_TOKENS = 24
TRAIN_LENGTH = 64  # the language model's training windows
HELD_OUT_FRACTION = 0.1


def small_config(vocabulary_size, max_positions, type_vocab_size, dropout):
    """Both models' shape: 3 layers, hidden 128, 4 heads."""
    return dict(
        vocab_size=vocabulary_size, hidden_size=128, num_hidden_layers=3,
        num_attention_heads=4, intermediate_size=256, max_position_embeddings=max_positions,
        type_vocab_size=type_vocab_size, hidden_dropout_prob=dropout,
        attention_probs_dropout_prob=0.0, pad_token_id=0,
    )


# Data ------------------------------------------------------------------------


def seq2seq_arrays(tokenizer, pairs):
    """Inputs and targets for UniLM training: `[CLS] source [SEP] target
    [SEP]` with segment ids 0 then 1; the target at position i is the token
    at i + 1 where that token is in segment 1, else the pad id (ignored by
    the loss), so the loss counts the summary tokens and its final [SEP]
    only."""
    token_ids = np.zeros((len(pairs), MAXLEN), "int32")
    segment_ids = np.zeros_like(token_ids)
    for row, (_, source, target) in enumerate(pairs):
        source_ids, _ = tokenizer.encode(source, maxlen=SOURCE_MAXLEN)
        target_ids, _ = tokenizer.encode(target, maxlen=MAXLEN - len(source_ids) + 1)
        ids = source_ids + target_ids[1:]  # the target without its [CLS]
        token_ids[row, : len(ids)] = ids
        segment_ids[row, len(source_ids) : len(ids)] = 1
    return {"token_ids": token_ids, "segment_ids": segment_ids}, unilm_targets(token_ids, segment_ids)


# Part 1: seq2seq -------------------------------------------------------------


def decoders():
    """Decoder label -> `generate` sampler."""
    return {
        "greedy": "greedy",
        "top-p 0.9 (T=0.8, seed 0)": keras_attn.samplers.TopPSampler(p=0.9, temperature=0.8),
        "beam search (4 beams)": keras_attn.samplers.BeamSearch(num_beams=4, length_penalty=1.0),
    }


def seq2seq(quick):
    pairs = signature_docstring_pairs()
    train_pairs, test_pairs, held_out_modules = split_by_module(pairs, HELD_OUT_FRACTION)
    random.Random(0).shuffle(train_pairs)
    random.Random(1).shuffle(test_pairs)
    if quick:
        train_pairs, test_pairs = train_pairs[:640], test_pairs[:32]
    else:
        test_pairs = test_pairs[:400]
    print(
        f"[1/2] seq2seq: {len(pairs)} (signature, docstring summary) pairs from the standard "
        f"library; {len(train_pairs)} for training, {len(test_pairs)} held out from "
        f"{len(held_out_modules)} modules never trained on ({', '.join(held_out_modules[:8])}, ...)",
        flush=True,
    )
    vocab = train_vocabulary(
        [text for _, source, target in train_pairs for text in (source, target)],
        tempfile.mkdtemp(), size=1000 if quick else 2000,
    )
    tokenizer = keras_attn.Tokenizer(vocab)
    train_x, train_y = seq2seq_arrays(tokenizer, train_pairs)
    test_x, test_y = seq2seq_arrays(tokenizer, test_pairs)

    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        small_config(tokenizer.vocab_size, MAXLEN, 2, 0.1), variant="roformer", application="unilm"
    )
    epochs, batch_size = (1, 64) if quick else (4, 64)
    compile_model(model, 2e-3, epochs * -(-len(train_pairs) // batch_size))
    print(f"      training a {model.count_params():,}-parameter unilm RoFormer for {epochs} epochs", flush=True)
    with Timer() as training:
        history = model.fit(
            train_x, train_y, validation_data=(test_x, test_y),
            batch_size=batch_size, epochs=epochs, verbose=2,
        )

    sources = [tokenizer.encode(source, maxlen=SOURCE_MAXLEN)[0] for _, source, _ in test_pairs]
    references = [tokenizer.decode(tokenizer.encode(target)[0]) for _, _, target in test_pairs]
    scores, predictions = {}, {}
    for label, sampler in decoders().items():
        with Timer() as timer:
            tokens = model.generate(
                sources, MAX_NEW_TOKENS, sampler=sampler, end_token_id=tokenizer.sep_id, seed=0
            )
        texts = [tokenizer.decode(row) for row in tokens]  # specials and padding dropped
        predictions[label] = texts
        scores[label] = dict(score(texts, references), seconds=timer.seconds)
        print(f"      decoded {len(texts)} held-out signatures with {label} in {timer.seconds:.1f} s", flush=True)

    train_sources = [tokenizer.decode(tokenizer.encode(s)[0]).split() for _, s, _ in train_pairs]
    train_targets = [tokenizer.decode(tokenizer.encode(t)[0]) for _, _, t in train_pairs]
    test_sources = [tokenizer.decode(ids).split() for ids in sources]
    baseline = nearest_neighbour(train_sources, train_targets, test_sources)
    scores["nearest-neighbour baseline"] = score(baseline, references)
    samples = [
        dict({"signature": test_pairs[i][1], "reference": references[i]},
             **{label: texts[i] for label, texts in predictions.items()})
        for i in range(min(6, len(test_pairs)))
    ]
    results = {
        "pairs": len(pairs), "train_pairs": len(train_pairs), "held_out_pairs": len(test_pairs),
        "held_out_modules": held_out_modules, "vocab_size": tokenizer.vocab_size,
        "parameters": model.count_params(), "epochs": epochs,
        "training_seconds": training.seconds, "scores": scores, "samples": samples,
        "loss": [float(v) for v in history.history["loss"]],
        "held_out_loss": [float(v) for v in history.history["val_loss"]],
    }
    return results


# Part 2: windowed language model ------------------------------------------------


def nll_by_position(model, ids, length, rows):
    """Per-character negative log-likelihood (nats) at each position of
    `rows` held-out windows of `length` characters, averaged over rows."""
    windows_ = ids[: rows * (length + 1)].reshape(rows, length + 1)
    logits = model.predict({"token_ids": windows_[:, :-1]}, batch_size=8, verbose=0)
    logits = logits - logits.max(axis=-1, keepdims=True)
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    chosen = np.take_along_axis(log_probabilities, windows_[:, 1:, None], axis=-1)[..., 0]
    return -chosen.mean(axis=0)


def windowed_lm(quick):
    held_out_package = "email"
    train_text = "\n".join(
        line for package in ("asyncio", "logging", "unittest", "http", "importlib", "xml",
                             "multiprocessing", "concurrent", "urllib", "json", "collections")
        for line in docstring_lines(package)
    )
    test_text = "\n".join(docstring_lines(held_out_package))
    vocabulary = ["[PAD]", "[UNK]"] + sorted(set(train_text))
    index = {character: i for i, character in enumerate(vocabulary)}
    encode = lambda text: np.array([index.get(c, 1) for c in text], "int32")  # noqa: E731
    train_ids, test_ids = encode(train_text), encode(test_text)
    rows = windows(train_ids, TRAIN_LENGTH + 1)
    epochs = 1 if quick else 2
    rows = rows[:256] if quick else rows[:3200]
    length = 4 * TRAIN_LENGTH if quick else 8 * TRAIN_LENGTH
    print(
        f"[2/2] windowed LM: {len(rows)} windows of {TRAIN_LENGTH} characters of docstrings, "
        f"{epochs} epoch(s); evaluated and generated at {length} characters "
        f"({length // TRAIN_LENGTH}x), held out: the {held_out_package} package's docstrings",
        flush=True,
    )
    keras.utils.set_random_seed(0)
    config = small_config(len(vocabulary), TRAIN_LENGTH, 0, 0.0)
    model = keras_attn.build_transformer_model(config, variant="roformer", application="lm")
    compile_model(model, 3e-3, epochs * -(-len(rows) // 32))
    with Timer() as training:
        history = model.fit({"token_ids": rows[:, :-1]}, rows[:, 1:], batch_size=32, epochs=epochs, verbose=2)
    trained_weights = model.get_weights()

    evaluation_rows = 4 if quick else 16
    prompt = test_ids[:TRAIN_LENGTH]
    new_tokens = length - TRAIN_LENGTH
    results = {"train_length": TRAIN_LENGTH, "length": length, "epochs": epochs,
               "training_seconds": training.seconds, "loss": [float(v) for v in history.history["loss"]],
               "prompt": test_text[:TRAIN_LENGTH]}
    for label, window in (("full attention", None), (f"attention_window={TRAIN_LENGTH}", TRAIN_LENGTH)):
        # The trained weights in a model rebuilt with this inference option.
        model = keras_attn.build_transformer_model(
            config, variant="roformer", application="lm", attention_window=window
        )
        model.set_weights(trained_weights)
        nll = nll_by_position(model, test_ids[TRAIN_LENGTH:], length, evaluation_rows)
        capacity = CachedForward(model).capacity(TRAIN_LENGTH, length)
        with Timer() as timer:
            tokens = model.generate(
                [prompt], new_tokens, sampler=keras_attn.samplers.TopPSampler(p=0.9, temperature=0.7), seed=0
            )
        text = "".join(vocabulary[t] for t in tokens[0] if t > 1)
        results[label] = {
            "nll_within_train_length": float(nll[:TRAIN_LENGTH].mean()),
            "nll_beyond_train_length": float(nll[TRAIN_LENGTH:].mean()),
            "nll_by_block": [float(nll[i : i + TRAIN_LENGTH].mean()) for i in range(0, length, TRAIN_LENGTH)],
            "cache_capacity": int(capacity),
            "generation_seconds": timer.seconds,
            "generated": text,
        }
        print(
            f"      {label:<22} held-out NLL positions <{TRAIN_LENGTH}: {nll[:TRAIN_LENGTH].mean():.3f}, "
            f">={TRAIN_LENGTH}: {nll[TRAIN_LENGTH:].mean():.3f} nats/char; generated {new_tokens} "
            f"characters with a cache of {capacity} keys per layer in {timer.seconds:.1f} s",
            flush=True,
        )
    return results


def report(seq2seq_results, lm_results):
    print("\nHeld-out docstring summaries (modules never seen in training):")
    print(f"  {'decoder':<30} {'word F1':>8} {'ROUGE-L':>8} {'exact':>6}")
    for label, scores in seq2seq_results["scores"].items():
        print(f"  {label:<30} {scores['word_f1']:>8.3f} {scores['rouge_l']:>8.3f} {scores['exact_match']:>6.3f}")
    for sample in seq2seq_results["samples"][:4]:
        print(f"  {sample['signature']}")
        for key, value in sample.items():
            if key != "signature":
                print(f"      {key:<28} {value}")
    print(f"\nLanguage model trained on {lm_results['train_length']} characters, run on {lm_results['length']}:")
    for label in ("full attention", f"attention_window={TRAIN_LENGTH}"):
        result = lm_results[label]
        print(
            f"  {label:<22} NLL beyond the training length {result['nll_beyond_train_length']:.3f} "
            f"nats/char (within: {result['nll_within_train_length']:.3f}); cache {result['cache_capacity']} keys"
        )
        print(f"      {lm_results['prompt']!r} + {result['generated'][:160]!r}...")


def main(arguments):
    print(f"backend={keras.config.backend()}", flush=True)
    with Timer() as total:
        seq2seq_results = seq2seq(arguments.quick)
        lm_results = windowed_lm(arguments.quick)
    report(seq2seq_results, lm_results)
    epochs = list(range(1, seq2seq_results["epochs"] + 1))
    write_results(
        "seq2seq_docstrings",
        {
            "seq2seq": seq2seq_results,
            "windowed_lm": lm_results,
            "_meta": {"backend": keras.config.backend(), "quick": arguments.quick,
                      "seconds": total.seconds, "cpu_seconds": time.process_time()},
        },
        {
            "seq2seq training loss": (epochs, seq2seq_results["loss"]),
            "seq2seq held-out loss": (epochs, seq2seq_results["held_out_loss"]),
        },
        xlabel="epoch", ylabel="loss on summary tokens (nats)", directory=arguments.output,
    )
    print(f"{total.seconds:.0f} s in all, {time.process_time():.0f} s of CPU time")


if __name__ == "__main__":
    main(ARGUMENTS)
