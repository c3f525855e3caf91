"""The data of the bert4keras task-layer examples: spans in lines of Python.

Lines of the standard library's own source, read character by character;
the entities are the keywords, identifiers, numbers and strings that
Python's `tokenize` module finds in them (what a syntax highlighter marks).
The model sees characters only, so it must learn where words end and which
words are keywords (`in` inside `index` is not one). Nothing is downloaded.
"""

import io
import keyword
import os
import random
import sys
import tokenize
from collections import Counter

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common import example_arguments  # noqa: E402
from common import standard_library_files  # noqa: E402
from common import write_results  # noqa: E402

TYPES = ["KEYWORD", "NAME", "NUMBER", "STRING"]
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]"]
SMALL_BERT = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    type_vocab_size=2,
)


def span_task_arguments(doc, batch_size):
    """The command line the span-labelling examples share: `--lines`,
    `--epochs`, `--max-chars` and `--batch-size` (this default)."""
    parser = example_arguments(doc)
    parser.add_argument(
        "--lines", type=int, default=6000,
        help="distinct Python source lines to label (80%% train, 20%% held out)",
    )
    parser.add_argument("--epochs", type=int, default=6, help="training epochs")
    parser.add_argument("--max-chars", type=int, default=46, help="longest line kept, in characters")
    parser.add_argument(
        "--batch-size", type=int, default=batch_size, help="examples per training step"
    )
    return parser


def line_spans(line):
    """`[(type index, start, end)]` (end inclusive, character offsets) of
    the entities of one line, or None if the line does not tokenize alone."""
    spans = []
    try:
        for token in tokenize.generate_tokens(io.StringIO(line).readline):
            if token.start[0] != 1:
                continue
            if token.type == tokenize.NAME:
                kind = "KEYWORD" if keyword.iskeyword(token.string) else "NAME"
            elif token.type == tokenize.NUMBER:
                kind = "NUMBER"
            elif token.type == tokenize.STRING:
                kind = "STRING"
            else:
                continue
            spans.append((TYPES.index(kind), token.start[1], token.end[1] - 1))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return None
    return spans


def load_lines(count, max_chars, seed=0):
    """`count` distinct stripped source lines of at most `max_chars`
    characters with at least one entity, and their spans, shuffled."""
    lines, seen = [], set()
    for path in standard_library_files():
        with open(path, encoding="utf-8", errors="replace") as file:
            for line in file:
                line = line.strip()
                if not line or line.startswith("#") or len(line) > max_chars or line in seen:
                    continue
                seen.add(line)
                lines.append(line)
        if len(lines) >= 20 * count:
            break
    random.Random(seed).shuffle(lines)
    examples = []
    for line in lines:
        spans = line_spans(line)
        if spans:
            examples.append((line, spans))
        if len(examples) == count:
            break
    return examples


def vocabulary(lines):
    characters = sorted(set("".join(lines)))
    return {c: i for i, c in enumerate(SPECIAL + characters)}


def encode(lines, index, maxlen):
    """`{"token_ids", "segment_ids"}`: `[CLS] characters [SEP]`, padded to
    `maxlen`; character `k` of a line is at position `k + 1`."""
    token_ids = np.zeros((len(lines), maxlen), "int32")
    for row, line in enumerate(lines):
        ids = [index["[CLS]"]] + [index.get(c, index["[UNK]"]) for c in line] + [index["[SEP]"]]
        token_ids[row, : len(ids)] = ids[:maxlen]
    return {"token_ids": token_ids, "segment_ids": np.zeros_like(token_ids)}


def span_f1(predicted, gold):
    """Micro F1 of the predicted span sets against the gold ones, and the
    precision and recall."""
    predicted = [set(spans) for spans in predicted]
    gold = [set(spans) for spans in gold]
    hits = sum(len(p & g) for p, g in zip(predicted, gold))
    found, expected = sum(map(len, predicted)), sum(map(len, gold))
    precision = hits / found if found else 0.0
    recall = hits / expected if expected else 0.0
    f1 = 2 * precision * recall / (precision + recall) if hits else 0.0
    return {"f1": f1, "precision": precision, "recall": recall}


def bio_tags(line, spans):
    """Per-character BIO tags: 0 outside, `1 + 2t` at the start of a span of
    type `t`, `2 + 2t` inside it."""
    tags = [0] * len(line)
    for kind, start, end in spans:
        tags[start] = 1 + 2 * kind
        for k in range(start + 1, end + 1):
            tags[k] = 2 + 2 * kind
    return tags


def bio_spans(tags):
    """The spans of a BIO tag sequence (an I without its B starts a span)."""
    spans, current = [], None
    for k, tag in enumerate(list(tags) + [0]):
        kind, inside = (tag - 1) // 2, tag > 0 and tag % 2 == 0
        if current is not None and not (inside and kind == current[0]):
            spans.append((current[0], current[1], k - 1))
            current = None
        if tag > 0 and current is None:
            current = (kind, k)
    return spans


def character_baseline(train, test):
    """The trivial baseline: each character gets the BIO tag it has most
    often in the training lines (no context); its spans on `test`."""
    counts = {}
    for line, spans in train:
        for character, tag in zip(line, bio_tags(line, spans)):
            counts.setdefault(character, Counter())[tag] += 1
    best = {c: counter.most_common(1)[0][0] for c, counter in counts.items()}
    return [bio_spans([best.get(c, 0) for c in line]) for line, _ in test]


def split_and_encode(lines, max_chars):
    """`(train, test, maxlen, vocabulary_size, train_inputs, test_inputs)`:
    `lines` lines of at most `max_chars` characters, 80/20, encoded with a
    character vocabulary of the training lines (plus [CLS] and [SEP])."""
    examples = load_lines(lines, max_chars)
    split = int(0.8 * len(examples))
    train, test = examples[:split], examples[split:]
    maxlen = max_chars + 2
    index = vocabulary([line for line, _ in train])
    train_inputs = encode([line for line, _ in train], index, maxlen)
    test_inputs = encode([line for line, _ in test], index, maxlen)
    return train, test, maxlen, len(index), train_inputs, test_inputs


def report(name, predicted, train, test, history, meta, directory=None):
    """Prints held-out span F1 against the per-character baseline and an
    example line, and writes `<name>.json`."""
    gold = [spans for _, spans in test]
    scores = span_f1(predicted, gold)
    baseline = span_f1(character_baseline(train, test), gold)
    print(
        f"held-out span F1 {scores['f1']:.3f} (precision {scores['precision']:.3f}, recall "
        f"{scores['recall']:.3f}); per-character majority-tag baseline {baseline['f1']:.3f}"
    )
    line, _ = test[0]
    print("example:", line)
    print("  spans:", [(TYPES[t], line[s : e + 1]) for t, s, e in predicted[0]])
    write_results(
        name,
        {
            "span_f1": scores,
            "baseline_span_f1": baseline,
            "history": {k: [float(v) for v in values] for k, values in history.history.items()},
            "_meta": meta,
        },
        directory=directory,
    )
