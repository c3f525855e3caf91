"""T5 and GPT-2 from scratch: docstring summaries by an encoder-decoder and by a decoder-only LM.

The task of `seq2seq_docstrings.py`, offline: the source is a function's
signature from the standard library's own source (`Queue.put(item, block,
timeout)`, read with `ast`, tests excluded), the target the first line of
its docstring ("Put an item into the queue."); whole standard-library
modules are held out (`email`, `json`, ... never seen in training). No T5
or GPT-2 checkpoint is installed on the machines this runs on, so both
models start from random weights.

Tokens: a SentencePiece unigram model learned from the training pairs,
read by `keras_attn.T5Tokenizer` (`extra_ids=0`: the sentinels serve span
corruption, which this task has none of). Its ids are T5's: `<pad>` 0 is
the padding and the decoder's start token, `</s>` 1 ends every text. Both
models use it, so their per-token losses count the same tokens.

1. T5 (`variant="t5.1.1"`, v1.1 as mT5 and Flan-T5: gated-GELU
   feed-forward, untied head; `--variant t5` for v1.0's ReLU and tied
   head, which learned more slowly here), `application="seq2seq"`:
   `encoder_token_ids` are the signature and `</s>`, `decoder_token_ids`
   the summary and `</s>` shifted right behind the pad id 0, the targets
   the summary and `</s>`. Trained with `fit` (teacher forcing) and
   `keras_attn.TokenCrossEntropy(ignore_id=0)`, so padding counts for
   nothing. Reported: the held-out loss and token accuracy on the summary
   tokens, the perplexity of the summaries again with every summary given
   another pair's signature (how much the model reads its source), and
   the held-out signatures decoded by `model.generate` (each
   source encoded once, then a cached decoder) greedily and by beam search
   (4 beams), scored as `seq2seq_docstrings.py` scores them (word F1,
   ROUGE-L, exact match) beside its nearest-neighbour baseline.
2. GPT-2 (`variant="gpt2"`, `application="lm"`) trained on the same pairs
   as one sequence, `signature </s> summary </s>`. Reported: the held-out
   perplexity over every token, and over the summary tokens alone (the
   same tokens as T5's loss, now predicted from the signature by a
   decoder-only model), also after another pair's signature, and greedy
   continuations of the held-out
   signatures (`signature </s>` as the prompt), scored the same way.

    KERAS_BACKEND=jax python examples/t5_docstrings.py [--quick] [--variant t5]

Writes t5_docstrings.{json,png} to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`; the plot where matplotlib is installed).
"""

import math
import os
import random
import re
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="640 pairs, 2 epochs, smaller models")
    parser.add_argument(
        "--variant", choices=["t5.1.1", "t5"], default="t5.1.1",
        help="T5 v1.1 (gated GELU, untied head) or the original T5",
    )
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, compile_model, nearest_neighbour, score  # noqa: E402
from common import signature_docstring_pairs  # noqa: E402
from common import split_by_module, train_sentencepiece, write_results  # noqa: E402

SOURCE_MAXLEN = 24  # the signature and its </s>
TARGET_MAXLEN = 24  # the summary and its </s>
MAX_NEW_TOKENS = 24
HELD_OUT_FRACTION = 0.1
SHOWN = 4  # held-out signatures printed with their outputs


def sizes(quick):
    """Data, vocabulary and training sizes of the quick and the full run."""
    if quick:
        return dict(train_pairs=640, test_pairs=32, vocab=1000, epochs=2, hidden=64, layers=2)
    return dict(train_pairs=None, test_pairs=400, vocab=2000, epochs=8, hidden=128, layers=3)


def t5_config(vocab_size, hidden, layers, variant):
    """T5's shape: 4 heads of `hidden / 4`, FFN 2 x hidden, and the
    feed-forward and head of the variant, said in full: a dict config does
    not take them from the variant (left out, the feed-forward would be
    GELU and the decoder would have no start token)."""
    config = dict(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=4, attention_head_size=hidden // 4, intermediate_size=2 * hidden,
        dropout_rate=0.1, attention_dropout_rate=0.0, decoder_start_token_id=0,
    )
    if variant == "t5.1.1":
        return dict(config, feed_forward_proj="gated-gelu", tie_word_embeddings=False)
    return dict(config, feed_forward_proj="relu")


def gpt2_config(vocab_size, hidden, layers):
    """GPT-2's shape with T5's layer count and width (FFN 4 x hidden, as
    GPT-2's), positions for the longest `signature </s> summary </s>`."""
    return dict(
        vocab_size=vocab_size, hidden_size=hidden, num_hidden_layers=layers,
        num_attention_heads=4, intermediate_size=4 * hidden,
        max_position_embeddings=SOURCE_MAXLEN + TARGET_MAXLEN, pad_token_id=0,
        hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0,
    )


# Data ------------------------------------------------------------------------


def load_pairs(quick):
    pairs = signature_docstring_pairs()
    train_pairs, test_pairs, held_out_modules = split_by_module(pairs, HELD_OUT_FRACTION)
    random.Random(0).shuffle(train_pairs)
    random.Random(1).shuffle(test_pairs)
    size = sizes(quick)
    return pairs, train_pairs[: size["train_pairs"]], test_pairs[: size["test_pairs"]], held_out_modules


def padded(rows, width):
    array = np.zeros((len(rows), width), "int32")
    for i, row in enumerate(rows):
        array[i, : len(row)] = row
    return array


def seq2seq_arrays(tokenizer, pairs):
    """T5's inputs and targets: the signature and `</s>` for the encoder,
    the summary and `</s>` as targets, and the same shifted right behind
    the pad id (the decoder's start token) as the decoder's input."""
    sources = [tokenizer.encode(source, maxlen=SOURCE_MAXLEN)[0] for _, source, _ in pairs]
    targets = [tokenizer.encode(target, maxlen=TARGET_MAXLEN)[0] for _, _, target in pairs]
    target_ids = padded(targets, TARGET_MAXLEN)
    decoder_ids = np.zeros_like(target_ids)
    decoder_ids[:, 1:] = target_ids[:, :-1]
    inputs = {"encoder_token_ids": padded(sources, SOURCE_MAXLEN), "decoder_token_ids": decoder_ids}
    return inputs, target_ids


def lm_arrays(tokenizer, pairs):
    """GPT-2's inputs and targets: `signature </s> summary </s>` and the
    same one token on; and which targets are the summary's (and its
    `</s>`), the tokens T5's loss counts."""
    width = SOURCE_MAXLEN + TARGET_MAXLEN
    rows, summary = [], np.zeros((len(pairs), width), bool)
    for i, (_, source, target) in enumerate(pairs):
        source_ids = tokenizer.encode(source, maxlen=SOURCE_MAXLEN)[0]
        target_ids = tokenizer.encode(target, maxlen=TARGET_MAXLEN)[0]
        rows.append(source_ids + target_ids)
        summary[i, len(source_ids) : len(source_ids) + len(target_ids)] = True
    ids = padded(rows, width)
    return {"token_ids": ids[:, :-1]}, ids[:, 1:], summary[:, 1:]


def target_log_probabilities(model, inputs, targets):
    """log p(target) at every position, from the model's logits."""
    logits = model.predict(inputs, batch_size=64, verbose=0).astype("float64")
    logits -= logits.max(axis=-1, keepdims=True)
    log_probabilities = logits - np.log(np.exp(logits).sum(axis=-1, keepdims=True))
    chosen = np.take_along_axis(log_probabilities, targets[..., None], axis=-1)[..., 0]
    return chosen, logits.argmax(axis=-1)


def with_other_signatures(pairs):
    """Each summary after the next pair's signature: what the summary
    perplexity is when the source says nothing about it."""
    return [(module, pairs[(i + 1) % len(pairs)][1], target) for i, (module, _, target) in enumerate(pairs)]


def decode_all(tokenizer, rows):
    return [tokenizer.decode(row) for row in rows]  # <pad> and </s> dropped


# Part 1: T5 ------------------------------------------------------------------


def train_t5(tokenizer, train_pairs, test_pairs, quick, variant):
    size = sizes(quick)
    train_x, train_y = seq2seq_arrays(tokenizer, train_pairs)
    test_x, test_y = seq2seq_arrays(tokenizer, test_pairs)
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        t5_config(tokenizer.vocab_size, size["hidden"], size["layers"], variant), variant=variant
    )
    batch_size, epochs = 32, size["epochs"]
    compile_model(model, 3e-3, epochs * -(-len(train_pairs) // batch_size))
    print(
        f"[1/2] T5 ({variant}): {model.count_params():,} parameters, {len(train_pairs)} pairs, "
        f"{epochs} epochs (teacher forcing)", flush=True,
    )
    with Timer() as training:
        history = model.fit(
            train_x, train_y, validation_data=(test_x, test_y),
            batch_size=batch_size, epochs=epochs, verbose=2,
        )
    log_probabilities, predicted = target_log_probabilities(model, test_x, test_y)
    counted = test_y != 0
    other_x, _ = seq2seq_arrays(tokenizer, with_other_signatures(test_pairs))
    other_log_probabilities, _ = target_log_probabilities(model, other_x, test_y)
    results = {
        "variant": variant, "parameters": model.count_params(), "epochs": epochs,
        "training_seconds": training.seconds,
        "loss": [float(v) for v in history.history["loss"]],
        "held_out_loss": [float(v) for v in history.history["val_loss"]],
        "held_out_token_accuracy": float((predicted == test_y)[counted].mean()),
        "held_out_summary_perplexity": math.exp(-log_probabilities[counted].mean()),
        "held_out_summary_perplexity_other_signatures": math.exp(-other_log_probabilities[counted].mean()),
    }
    sources = [tokenizer.encode(source, maxlen=SOURCE_MAXLEN)[0] for _, source, _ in test_pairs]
    outputs, seconds = {}, {}
    decoders = {"T5 greedy": "greedy", "T5 beam search (4 beams)": keras_attn.samplers.BeamSearch(4)}
    for label, sampler in decoders.items():
        with Timer() as timer:
            tokens = model.generate(sources, MAX_NEW_TOKENS, sampler=sampler, end_token_id=tokenizer.end_id)
        outputs[label], seconds[label] = decode_all(tokenizer, tokens), timer.seconds
        print(f"      decoded {len(sources)} held-out signatures, {label}, in {timer.seconds:.1f} s", flush=True)
    return results, outputs, seconds


# Part 2: GPT-2 ---------------------------------------------------------------


def train_gpt2(tokenizer, train_pairs, test_pairs, quick):
    size = sizes(quick)
    train_x, train_y, _ = lm_arrays(tokenizer, train_pairs)
    test_x, test_y, test_summary = lm_arrays(tokenizer, test_pairs)
    keras.utils.set_random_seed(0)
    model = keras_attn.build_transformer_model(
        gpt2_config(tokenizer.vocab_size, size["hidden"], size["layers"]), variant="gpt2",
        application="lm",
    )
    batch_size, epochs = 32, size["epochs"]
    compile_model(model, 3e-3, epochs * -(-len(train_pairs) // batch_size))
    print(
        f"[2/2] GPT-2: {model.count_params():,} parameters, the same pairs as "
        f"'signature </s> summary </s>', {epochs} epochs", flush=True,
    )
    with Timer() as training:
        history = model.fit(
            train_x, train_y, validation_data=(test_x, test_y),
            batch_size=batch_size, epochs=epochs, verbose=2,
        )
    log_probabilities, predicted = target_log_probabilities(model, test_x, test_y)
    counted = test_y != 0
    other_x, other_y, other_summary = lm_arrays(tokenizer, with_other_signatures(test_pairs))
    other_log_probabilities, _ = target_log_probabilities(model, other_x, other_y)
    results = {
        "parameters": model.count_params(), "epochs": epochs, "training_seconds": training.seconds,
        "loss": [float(v) for v in history.history["loss"]],
        "held_out_loss": [float(v) for v in history.history["val_loss"]],
        "held_out_perplexity": math.exp(-log_probabilities[counted].mean()),
        "held_out_summary_perplexity": math.exp(-log_probabilities[test_summary].mean()),
        "held_out_summary_perplexity_other_signatures": (
            math.exp(-other_log_probabilities[other_summary].mean())
        ),
        "held_out_summary_token_accuracy": float((predicted == test_y)[test_summary].mean()),
    }
    prompts = [tokenizer.encode(source, maxlen=SOURCE_MAXLEN)[0] for _, source, _ in test_pairs]
    with Timer() as timer:
        tokens = model.generate(prompts, MAX_NEW_TOKENS, end_token_id=tokenizer.end_id)
    print(f"      continued {len(prompts)} held-out signatures greedily in {timer.seconds:.1f} s", flush=True)
    return results, decode_all(tokenizer, tokens), timer.seconds


# Report -----------------------------------------------------------------------


def report(results):
    t5, gpt2 = results["t5"], results["gpt2"]
    print(f"\nHeld-out pairs ({results['held_out_pairs']}, modules never trained on):")
    print(
        f"  T5    summary tokens: loss {t5['held_out_loss'][-1]:.3f}, perplexity "
        f"{t5['held_out_summary_perplexity']:.1f} ({t5['held_out_summary_perplexity_other_signatures']:.1f} "
        f"after another pair's signature), token accuracy {t5['held_out_token_accuracy']:.3f}"
    )
    print(
        f"  GPT-2 summary tokens: perplexity {gpt2['held_out_summary_perplexity']:.1f} "
        f"({gpt2['held_out_summary_perplexity_other_signatures']:.1f} after another pair's signature), "
        f"token accuracy {gpt2['held_out_summary_token_accuracy']:.3f}; all tokens: perplexity "
        f"{gpt2['held_out_perplexity']:.1f}"
    )
    print(f"\n  {'decoder':<30} {'word F1':>8} {'ROUGE-L':>8} {'exact':>6}")
    for label, scores in results["scores"].items():
        print(f"  {label:<30} {scores['word_f1']:>8.3f} {scores['rouge_l']:>8.3f} {scores['exact_match']:>6.3f}")
    for sample in results["samples"][:SHOWN]:
        print(f"  {sample['signature']}")
        for key, value in sample.items():
            if key != "signature":
                print(f"      {key:<28} {value}")


def main(arguments):
    print(f"backend={keras.config.backend()}", flush=True)
    with Timer() as total:
        pairs, train_pairs, test_pairs, held_out_modules = load_pairs(arguments.quick)
        print(
            f"{len(pairs)} (signature, docstring summary) pairs from the standard library; "
            f"{len(train_pairs)} for training, {len(test_pairs)} held out from "
            f"{len(held_out_modules)} modules never trained on ({', '.join(held_out_modules[:8])}, ...)",
            flush=True,
        )
        model_path = train_sentencepiece(
            [text for _, source, target in train_pairs for text in (source, target)],
            tempfile.mkdtemp(), size=sizes(arguments.quick)["vocab"],
        )
        tokenizer = keras_attn.T5Tokenizer(model_path, extra_ids=0)
        t5, t5_outputs, t5_seconds = train_t5(
            tokenizer, train_pairs, test_pairs, arguments.quick, arguments.variant
        )
        gpt2, gpt2_outputs, gpt2_seconds = train_gpt2(tokenizer, train_pairs, test_pairs, arguments.quick)

    references = [tokenizer.decode(tokenizer.encode(target)[0]) for _, _, target in test_pairs]
    outputs = dict(t5_outputs, **{"GPT-2 greedy": gpt2_outputs})
    seconds = dict(t5_seconds, **{"GPT-2 greedy": gpt2_seconds})
    scores = {
        label: dict(score(texts, references), seconds=seconds[label]) for label, texts in outputs.items()
    }
    # Signatures compared by their lowercased names and punctuation, as
    # seq2seq_docstrings.py's WordPiece decoding splits them.
    signature_words = lambda text: re.findall(r"\w+|[^\w\s]", text.lower())  # noqa: E731
    scores["nearest-neighbour baseline"] = score(
        nearest_neighbour(
            [signature_words(source) for _, source, _ in train_pairs],
            [tokenizer.decode(tokenizer.encode(target)[0]) for _, _, target in train_pairs],
            [signature_words(source) for _, source, _ in test_pairs],
        ),
        references,
    )
    samples = [
        dict({"signature": test_pairs[i][1], "reference": references[i]},
             **{label: texts[i] for label, texts in outputs.items()})
        for i in range(min(6, len(test_pairs)))
    ]
    results = {
        "pairs": len(pairs), "train_pairs": len(train_pairs), "held_out_pairs": len(test_pairs),
        "held_out_modules": held_out_modules, "vocab_size": tokenizer.vocab_size,
        "tokenizer": "SentencePiece unigram learned from the training pairs, read by "
                     "keras_attn.T5Tokenizer(extra_ids=0)",
        "t5": t5, "gpt2": gpt2, "scores": scores, "samples": samples,
        "_meta": {"backend": keras.config.backend(), "quick": arguments.quick,
                  "seconds": total.seconds, "cpu_seconds": time.process_time()},
    }
    report(results)
    epochs = list(range(1, t5["epochs"] + 1))
    write_results(
        "t5_docstrings", results,
        {
            "T5 held-out loss (summary tokens)": (epochs, t5["held_out_loss"]),
            "GPT-2 held-out loss (all tokens)": (epochs, gpt2["held_out_loss"]),
            "T5 training loss": (epochs, t5["loss"]),
            "GPT-2 training loss": (epochs, gpt2["loss"]),
        },
        xlabel="epoch", ylabel="cross-entropy (nats per token)", directory=arguments.output,
    )
    print(f"{total.seconds:.0f} s in all, {time.process_time():.0f} s of CPU time")


if __name__ == "__main__":
    main(ARGUMENTS)
