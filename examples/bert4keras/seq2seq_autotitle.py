"""UniLM title generation: a docstring's body in, its first line out, with beam search.

bert4keras's `task_seq2seq_autotitle` (news body -> headline, a BERT with
the UniLM mask), offline: the standard library's docstrings that have a
first line, a blank line and a body are the pairs; the body is the
"article", the first line its "title". As in the bert4keras script:
`keras_attn.Tokenizer` encodes `(body, title)` as `[CLS] body [SEP] title
[SEP]` with segment ids 0 then 1 (`maxlen` truncating the longer text);
`build_transformer_model(config, application="unilm")` gives the body
bidirectional attention and the title causal attention; the loss
(`keras_attn.TokenCrossEntropy`) counts the title tokens only (the targets
are the next token where it is in segment 1, else ignored); titles are
generated with `keras_attn.AutoRegressiveDecoder(model, end_id=[SEP],
maxlen=...).beam_search([token_ids, segment_ids], topk)`, the body encoded
with `maxlen - title maxlen` tokens as in the script; and an evaluation
callback generates titles for validation bodies at the end of every epoch,
prints two, and keeps the weights of the epoch with the best ROUGE-L (the
script keeps the lowest training loss and prints two titles).

Whole top-level modules are held out (never trained on); the held-out
titles are scored with ROUGE-1, ROUGE-2 and ROUGE-L (F1 over words),
beside the first-words baseline, which copies the first k words of the
body (k: the training titles' median length). The model is small and
trained from scratch for minutes, not a pretrained BERT for hours: compare
it with the baseline, which may well win.

    KERAS_BACKEND=jax python examples/bert4keras/seq2seq_autotitle.py [--quick]

Writes seq2seq_autotitle.json to `./keras_attn_results/` (`--output DIR`
elsewhere; `--update-results` replaces the committed ones in
`examples/results/`).
"""

import os
import random
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer pairs, a smaller model, two epochs")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, compile_model, docstring_title_pairs, rouge_scores  # noqa: E402
from common import split_by_module, train_vocabulary, unilm_targets, write_results  # noqa: E402

HELD_OUT_FRACTION = 0.1
TOPK = 3  # beams


def settings(quick):
    """Sizes of the run: the quick one trains a 2-layer, 64-wide model
    for 2 epochs on 640 pairs."""
    if quick:
        return dict(
            train_pairs=640, validation_pairs=8, test_pairs=24, maxlen=64, title_maxlen=16,
            epochs=2, batch_size=32, vocabulary_size=800,
            model=dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128),
        )
    return dict(
        train_pairs=None, validation_pairs=48, test_pairs=None, maxlen=128, title_maxlen=24,
        epochs=12, batch_size=32, vocabulary_size=3000,
        model=dict(hidden_size=128, num_hidden_layers=3, num_attention_heads=4, intermediate_size=256),
    )


# Data ------------------------------------------------------------------------


def encode_pairs(tokenizer, pairs, maxlen):
    """`{"token_ids", "segment_ids"}` of `[CLS] body [SEP] title [SEP]`,
    padded to `maxlen` (one shape for every batch), and the UniLM targets."""
    token_ids, segment_ids = [], []
    for _, body, title in pairs:
        ids, segments = tokenizer.encode(body, title, maxlen=maxlen)
        token_ids.append(ids)
        segment_ids.append(segments)
    token_ids = keras_attn.sequence_padding(token_ids, length=maxlen)
    segment_ids = keras_attn.sequence_padding(segment_ids, length=maxlen)
    return {"token_ids": token_ids, "segment_ids": segment_ids}, unilm_targets(token_ids, segment_ids)


def first_words(bodies, count):
    """The first-words baseline: the first `count` words of each body."""
    return [" ".join(body.split()[:count]) for body in bodies]


# Generation and evaluation -----------------------------------------------------


class AutoTitle:
    """bert4keras's `AutoTitle(AutoRegressiveDecoder)`: the body as the
    source (at most `maxlen - title_maxlen` tokens), a title of at most
    `title_maxlen` tokens by beam search, ending at [SEP]."""

    def __init__(self, model, tokenizer, maxlen, title_maxlen):
        self.tokenizer = tokenizer
        self.source_maxlen = maxlen - title_maxlen
        self.decoder = keras_attn.AutoRegressiveDecoder(
            model, start_id=None, end_id=tokenizer.sep_id, maxlen=title_maxlen
        )

    def generate_ids(self, body, topk=TOPK):
        token_ids, segment_ids = self.tokenizer.encode(body, maxlen=self.source_maxlen)
        return self.decoder.beam_search([token_ids, segment_ids], topk=topk)

    def generate(self, body, topk=TOPK):
        return self.tokenizer.decode(self.generate_ids(body, topk))


class Evaluator(keras.callbacks.Callback):
    """At the end of every epoch: titles for the validation bodies, their
    ROUGE scores, two of them printed; the weights of the best ROUGE-L
    epoch are kept and restored when training ends."""

    def __init__(self, autotitle, pairs, references):
        super().__init__()
        self.autotitle, self.pairs, self.references = autotitle, pairs, references
        self.best, self.best_weights, self.history = -1.0, None, []

    def on_epoch_end(self, epoch, logs=None):
        titles = [self.autotitle.generate(body) for _, body, _ in self.pairs]
        scores = rouge_scores(titles, self.references)
        self.history.append(dict(scores, epoch=epoch + 1, loss=float(logs["loss"])))
        if scores["rouge_l"] > self.best:
            self.best, self.best_weights = scores["rouge_l"], self.model.get_weights()
        print(
            f"      epoch {epoch + 1}: validation ROUGE-1 {scores['rouge_1']:.3f}, ROUGE-2 "
            f"{scores['rouge_2']:.3f}, ROUGE-L {scores['rouge_l']:.3f}", flush=True,
        )
        for (_, body, _), title in list(zip(self.pairs, titles))[:2]:
            print(f"        {body[:70]!r}... -> {title!r}", flush=True)

    def on_train_end(self, logs=None):
        if self.best_weights is not None:
            self.model.set_weights(self.best_weights)


def held_out_loss(model, inputs, targets, batch_size):
    """The mean title-token cross-entropy (nats) on `inputs`."""
    return float(model.evaluate(inputs, targets, batch_size=batch_size, verbose=0))


# The run -----------------------------------------------------------------------


def main(arguments):
    print(f"backend={keras.config.backend()}", flush=True)
    sizes = settings(arguments.quick)
    with Timer() as total:
        pairs = docstring_title_pairs()
        train_pairs, test_pairs, held_out_modules = split_by_module(pairs, HELD_OUT_FRACTION)
        random.Random(0).shuffle(train_pairs)
        random.Random(1).shuffle(test_pairs)
        validation_pairs = train_pairs[: sizes["validation_pairs"]]
        train_pairs = train_pairs[sizes["validation_pairs"] :][: sizes["train_pairs"]]
        test_pairs = test_pairs[: sizes["test_pairs"]]
        print(
            f"{len(pairs)} (docstring body, first line) pairs from the standard library; "
            f"{len(train_pairs)} for training, {len(validation_pairs)} for the callback, "
            f"{len(test_pairs)} held out from {len(held_out_modules)} modules never trained on "
            f"({', '.join(held_out_modules[:6])}, ...)",
            flush=True,
        )
        vocabulary = train_vocabulary(
            [text for _, body, title in train_pairs for text in (body, title)],
            tempfile.mkdtemp(), size=sizes["vocabulary_size"],
        )
        tokenizer = keras_attn.Tokenizer(vocabulary)
        maxlen, title_maxlen = sizes["maxlen"], sizes["title_maxlen"]
        train_x, train_y = encode_pairs(tokenizer, train_pairs, maxlen)
        test_x, test_y = encode_pairs(tokenizer, test_pairs, maxlen)

        keras.utils.set_random_seed(0)
        config = dict(
            sizes["model"], vocab_size=tokenizer.vocab_size, max_position_embeddings=maxlen,
            type_vocab_size=2, hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.0,
        )
        model = keras_attn.build_transformer_model(config, application="unilm")
        epochs, batch_size = sizes["epochs"], sizes["batch_size"]
        compile_model(model, 2e-3, epochs * -(-len(train_pairs) // batch_size))
        untrained_loss = held_out_loss(model, test_x, test_y, batch_size)

        def normalise(text):  # the tokenizer's lowercasing and spacing
            return tokenizer.decode(tokenizer.encode(text)[0])

        autotitle = AutoTitle(model, tokenizer, maxlen, title_maxlen)
        evaluator = Evaluator(autotitle, validation_pairs, [normalise(t) for _, _, t in validation_pairs])
        print(f"training a {model.count_params():,}-parameter UniLM BERT for {epochs} epochs", flush=True)
        with Timer() as training:
            history = model.fit(
                train_x, train_y, batch_size=batch_size, epochs=epochs, verbose=2, callbacks=[evaluator]
            )
        trained_loss = held_out_loss(model, test_x, test_y, batch_size)

        references = [normalise(title) for _, _, title in test_pairs]
        with Timer() as generation:
            generated_ids = [autotitle.generate_ids(body) for _, body, _ in test_pairs]
        titles = [tokenizer.decode(ids) for ids in generated_ids]
        title_words = int(np.median([len(title.split()) for _, _, title in train_pairs]))
        baseline = first_words([normalise(body) for _, body, _ in test_pairs], title_words)
        scores = {
            f"UniLM, beam search ({TOPK} beams)": rouge_scores(titles, references),
            f"first {title_words} words of the body": rouge_scores(baseline, references),
        }

    results = {
        "pairs": len(pairs), "train_pairs": len(train_pairs), "validation_pairs": len(validation_pairs),
        "held_out_pairs": len(test_pairs), "held_out_modules": held_out_modules,
        "vocab_size": tokenizer.vocab_size, "parameters": model.count_params(), "epochs": epochs,
        "maxlen": maxlen, "title_maxlen": title_maxlen, "end_id": tokenizer.sep_id,
        "training_seconds": training.seconds, "generation_seconds": generation.seconds,
        "loss": [float(v) for v in history.history["loss"]],
        "held_out_loss_untrained": untrained_loss, "held_out_loss_trained": trained_loss,
        "callback": evaluator.history, "scores": scores,
        "generated_ids": [[int(i) for i in ids] for ids in generated_ids],
        "samples": [
            {"body": body[:200], "reference": reference, "generated": title, "first_words": first}
            for (_, body, _), reference, title, first in list(zip(test_pairs, references, titles, baseline))[:6]
        ],
        "_meta": {"backend": keras.config.backend(), "quick": arguments.quick,
                  "seconds": total.seconds, "cpu_seconds": time.process_time()},
    }
    print(f"\nHeld-out title-token loss: {untrained_loss:.3f} nats untrained, {trained_loss:.3f} trained")
    print(f"Held-out titles ({len(test_pairs)}, modules never trained on):")
    print(f"  {'':<36} {'ROUGE-1':>8} {'ROUGE-2':>8} {'ROUGE-L':>8}")
    for label, values in scores.items():
        print(f"  {label:<36} {values['rouge_1']:>8.3f} {values['rouge_2']:>8.3f} {values['rouge_l']:>8.3f}")
    for sample in results["samples"][:3]:
        print(f"  {sample['body'][:90]!r}...")
        print(f"      reference   {sample['reference']}")
        print(f"      generated   {sample['generated']}")
        print(f"      first words {sample['first_words']}")
    write_results("seq2seq_autotitle", results, directory=arguments.output)
    print(f"{total.seconds:.0f} s in all, {time.process_time():.0f} s of CPU time")


if __name__ == "__main__":
    main(ARGUMENTS)
