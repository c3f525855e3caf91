"""Reading comprehension as seq2seq: one answer decoded from several passages at once.

bert4keras's `task_reading_comprehension_by_seq2seq` example, offline: a
UniLM model (a small RoFormer, trained from scratch) reads `[CLS] passage
[SEP] question [SEP]` and writes the answer; at answer time every passage
of a question is decoded together and each step's next-token
probabilities are combined over the passages
(bert4keras's `AutoRegressiveDecoder` with `use_states=True`; here
`AutoRegressiveDecoder(..., combine=...)`, run inside the compiled loop).

The data are the Python standard library's documented functions: the
question is a function's qualified name (`Queue.put`), a passage is the
first docstring line of some function followed by `| name`, and the
answer is the first two words of the asked function's docstring line. Each question
gets three passages, one of them its own (at a random place); a passage
of another function answers nothing (the empty answer, as bert4keras
trains its no-answer passages). Held-out questions come from modules
never trained on, so the answer must be copied from the passages.

The combination is bert4keras's vote: at the first step a passage whose
most probable token is the end marks itself as answerless and is dropped
(a state carried through the loop), then `sum p^2 / (sum p + 1)` over the
kept passages. Compared, by exact match and word F1 on held-out
questions: the plain mean of the passages' probabilities, one passage
picked at random (what decoding a single passage gives), the right
passage alone (an upper bound no reader has), and the most frequent
training answer (no model).

    KERAS_BACKEND=jax python examples/bert4keras/reading_comprehension_seq2seq.py [--quick]

Writes reading_comprehension_seq2seq.json to `./keras_attn_results/`
(`--output DIR` elsewhere; `--update-results` replaces the committed ones
in `examples/results/`).
"""

import os
import random
import sys
import time
from collections import Counter

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import example_arguments, parse_example_arguments  # noqa: E402  (imports no Keras)


def parse_arguments(argv=None):
    parser = example_arguments(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer questions, a smaller model")
    return parse_example_arguments(parser, argv)


if __name__ == "__main__":
    ARGUMENTS = parse_arguments()  # before Keras is imported: --help is instant

import keras  # noqa: E402
import numpy as np  # noqa: E402
from keras import ops  # noqa: E402

import keras_attn  # noqa: E402
from common import Timer, compile_model, signature_docstring_pairs, split_by_module  # noqa: E402
from common import word_f1, write_results  # noqa: E402

PASSAGES = 3  # per question, one of them the question's own
PASSAGE_LENGTH = 40  # characters of "docstring line | name"
QUESTION_LENGTH = 20
ANSWER_WORDS = 2
ANSWER_LENGTH = 16
PAD, UNK, CLS, SEP = 0, 1, 2, 3
QUICK_QUESTIONS, QUICK_EPOCHS = 3000, 8
MAXLEN = PASSAGE_LENGTH + QUESTION_LENGTH + ANSWER_LENGTH + 4


# Data ------------------------------------------------------------------------


def questions():
    """`(module, name, passage, answer)` for every documented function with
    a unique qualified name and an answer of `ANSWER_WORDS` words."""
    seen, rows = Counter(), []
    for module, signature, summary in signature_docstring_pairs():
        name = signature.split("(")[0][:QUESTION_LENGTH]
        words = summary.rstrip(".").split()
        if len(words) < ANSWER_WORDS:
            continue
        answer = " ".join(words[:ANSWER_WORDS])[:ANSWER_LENGTH]
        seen[name] += 1
        passage = summary[: PASSAGE_LENGTH - len(name) - 3] + " | " + name
        rows.append((module, name, passage, answer))
    return [row for row in rows if seen[row[1]] == 1]


class Characters:
    """Character ids: 0-3 are [PAD], [UNK], [CLS], [SEP]."""

    def __init__(self, texts):
        characters = sorted({c for text in texts for c in text})
        self.vocabulary = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"] + characters
        self.index = {c: i for i, c in enumerate(self.vocabulary)}

    def ids(self, text):
        return [self.index.get(c, UNK) for c in text]

    def prompt(self, passage, question):
        """`[CLS] passage [SEP] question [SEP]`, all segment 0."""
        return [CLS] + self.ids(passage) + [SEP] + self.ids(question) + [SEP]

    def text(self, ids):
        return "".join(self.vocabulary[i] for i in ids if i > SEP)


def training_arrays(characters, rows, seed):
    """Each question twice: with its own passage and answer, and with
    another question's passage and the empty answer (only [SEP]). Targets
    are the answer tokens (segment 1) only, shifted by one."""
    rng = random.Random(seed)
    samples = []
    for index, (_, name, passage, answer) in enumerate(rows):
        samples.append((characters.prompt(passage, name), characters.ids(answer) + [SEP]))
        other = rows[(index + rng.randrange(1, len(rows))) % len(rows)][2]
        samples.append((characters.prompt(other, name), [SEP]))
    rng.shuffle(samples)
    token_ids = np.zeros((len(samples), MAXLEN), "int32")
    segment_ids = np.zeros_like(token_ids)
    for row, (prompt, output) in enumerate(samples):
        token_ids[row, : len(prompt) + len(output)] = prompt + output
        segment_ids[row, len(prompt) : len(prompt) + len(output)] = 1
    targets = np.zeros_like(token_ids)
    targets[:, :-1] = np.where(segment_ids[:, 1:] == 1, token_ids[:, 1:], PAD)
    return {"token_ids": token_ids, "segment_ids": segment_ids}, targets


def test_questions(rows, all_rows, seed):
    """Each held-out question with `PASSAGES` passages, its own at a random
    place, the others of other held-out functions."""
    rng = random.Random(seed)
    cases = []
    for _, name, passage, answer in rows:
        others = [p for _, n, p, _ in rng.sample(all_rows, PASSAGES + 1) if n != name]
        passages = others[: PASSAGES - 1]
        gold = rng.randrange(PASSAGES)
        passages.insert(gold, passage)
        cases.append({"question": name, "passages": passages, "gold": gold, "answer": answer})
    return cases


# Combining the passages ------------------------------------------------------


def vote(probabilities, states):
    """bert4keras's combination: `probabilities` `(passages, rows, vocab)`.
    At the first step a passage whose most probable token is [SEP] (no
    answer) is dropped for the rest of the decode (unless all are); then
    `sum p^2 / (sum p + 1)` over the kept passages."""
    step, keep = states
    answers = ops.cast(ops.not_equal(ops.argmax(probabilities[:, 0], axis=-1), SEP), "float32")
    answers = ops.where(ops.sum(answers) > 0, answers, ops.ones_like(answers))
    keep = ops.where(ops.equal(step, 0), answers, keep)
    kept = probabilities * keep[:, None, None]
    return ops.sum(kept**2, axis=0) / (ops.sum(kept, axis=0) + 1.0), (step + 1, keep)


def mean(probabilities, states):
    return ops.mean(probabilities, axis=0), states


def scores(predictions, references):
    return {
        "exact_match": float(np.mean([p == r for p, r in zip(predictions, references)])),
        "word_f1": float(np.mean([word_f1(p.split(), r.split()) for p, r in zip(predictions, references)])),
    }


def main(arguments):
    quick = arguments.quick
    print(f"backend={keras.config.backend()}", flush=True)
    with Timer() as total:
        rows = questions()
        triples = [(module, name, index) for index, (module, name, _, _) in enumerate(rows)]
        train, test, held_out_modules = split_by_module(triples, 0.1)
        train_rows = [rows[index] for _, _, index in train]
        test_rows = [rows[index] for _, _, index in test]
        random.Random(0).shuffle(train_rows)
        random.Random(1).shuffle(test_rows)
        train_rows = train_rows[:QUICK_QUESTIONS] if quick else train_rows
        test_rows = test_rows[: 60 if quick else 300]
        characters = Characters(p for _, _, p, _ in train_rows)
        train_x, train_y = training_arrays(characters, train_rows, seed=0)
        epochs, hidden, layers = (QUICK_EPOCHS, 64, 2) if quick else (12, 128, 3)
        print(
            f"{len(rows)} documented functions; {len(train_rows)} training questions, "
            f"{len(test_rows)} held-out ones from {len(held_out_modules)} modules never "
            f"trained on; {PASSAGES} passages per question",
            flush=True,
        )
        keras.utils.set_random_seed(0)
        config = dict(
            vocab_size=len(characters.vocabulary), hidden_size=hidden, num_hidden_layers=layers,
            num_attention_heads=4, intermediate_size=2 * hidden, max_position_embeddings=MAXLEN,
            type_vocab_size=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
            pad_token_id=PAD,
        )
        model = keras_attn.build_transformer_model(config, variant="roformer", application="unilm")
        batch_size = 64
        compile_model(model, 3e-3, epochs * -(-len(train_y) // batch_size))
        with Timer() as training:
            history = model.fit(train_x, train_y, batch_size=batch_size, epochs=epochs, verbose=2)

        cases = test_questions(test_rows, test_rows, seed=2)
        references = [case["answer"] for case in cases]
        prompts = [
            [characters.prompt(p, case["question"]) for p in case["passages"]] for case in cases
        ]
        settings = dict(start_id=None, end_id=SEP, maxlen=ANSWER_LENGTH)
        decoders = {
            "vote (bert4keras)": keras_attn.AutoRegressiveDecoder(model, combine=vote, **settings),
            "mean": keras_attn.AutoRegressiveDecoder(model, combine=mean, **settings),
        }
        single = keras_attn.AutoRegressiveDecoder(model, **settings)
        rng = random.Random(3)
        predictions = {}
        with Timer() as decoding:
            for label, decoder in decoders.items():
                states = (np.int32(0), np.ones((PASSAGES,), "float32")) if label.startswith("vote") else None
                predictions[label] = [
                    characters.text(decoder.beam_search(group, topk=1, states=states))
                    for group in prompts
                ]
            predictions["one random passage"] = [
                characters.text(single.beam_search([group[rng.randrange(PASSAGES)]], topk=1))
                for group in prompts
            ]
            predictions["its own passage alone (upper bound)"] = [
                characters.text(single.beam_search([group[case["gold"]]], topk=1))
                for group, case in zip(prompts, cases)
            ]
        frequent = Counter(answer for _, _, _, answer in train_rows).most_common(1)[0][0]
        predictions["most frequent training answer"] = [frequent] * len(cases)
        results_by_method = {label: scores(texts, references) for label, texts in predictions.items()}
    for label, result in results_by_method.items():
        print(f"{label:>38}: exact match {result['exact_match']:.3f}, word F1 {result['word_f1']:.3f}")
    results = {
        "passages_per_question": PASSAGES,
        "train_questions": len(train_rows),
        "held_out_questions": len(cases),
        "epochs": epochs,
        "variant": "roformer",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "loss": [float(v) for v in history.history["loss"]],
        "methods": results_by_method,
        "examples": [
            {"question": case["question"], "answer": case["answer"],
             "vote": predictions["vote (bert4keras)"][i]}
            for i, case in enumerate(cases[:5])
        ],
        "training_seconds": training.seconds,
        "decoding_seconds": decoding.seconds,
        "_meta": {"backend": keras.config.backend(), "quick": quick,
                  "seconds": total.seconds, "cpu_seconds": time.process_time()},
    }
    write_results("reading_comprehension_seq2seq", results, directory=arguments.output)
    print(f"{total.seconds:.0f} s in all")


if __name__ == "__main__":
    main(ARGUMENTS)
