"""The files the documentation's examples name, made small and random.

The examples keep the names readers know (`uncased_L-12_H-768_A-12/`,
`bert-base-uncased/`, `gpt2/`, `t5-small/`, `vocab.txt`, ...). Before a
page's blocks run, `prepare` writes a tiny model or vocabulary of each name
that the page's code mentions into the working directory: the same formats
as the real releases (Google's TF checkpoints, Hugging Face directories,
WordPiece, byte-level BPE and SentencePiece vocabularies), so loading code
runs as it would on the real files, in seconds. Made once per process and
copied for each page.

To let a new example name a new file, add a writer to `FILES`.
"""

import inspect
import json
import os
import re
import shutil

from tests.checkpoint_files import google_bert_arrays
from tests.checkpoint_files import write_tf_checkpoint

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

# Every BERT-format model below: a few layers of a few features.
BERT = dict(
    hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=64,
    hidden_act="gelu", hidden_dropout_prob=0.1, attention_probs_dropout_prob=0.1,
    max_position_embeddings=128, type_vocab_size=2, initializer_range=0.02,
)


def corpus():
    """Docstring lines of a few standard-library modules."""
    import argparse
    import asyncio
    import email
    import json as json_module
    import textwrap

    lines = []
    for module in (argparse, asyncio, email, json_module, textwrap):
        for _, member in inspect.getmembers(module):
            lines.extend(line for line in (inspect.getdoc(member) or "").splitlines() if line.strip())
    return lines


def write_vocabulary(path):
    """A 600-token uncased WordPiece `vocab.txt`, [PAD] first, as BERT's."""
    from tokenizers import Tokenizer, models, normalizers, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.WordPiece(unk_token="[UNK]"))
    tokenizer.normalizer = normalizers.BertNormalizer(lowercase=True)
    tokenizer.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tokenizer.train_from_iterator(
        corpus(), trainers.WordPieceTrainer(vocab_size=600, special_tokens=SPECIAL_TOKENS)
    )
    vocabulary = tokenizer.get_vocab()
    with open(path, "w", encoding="utf-8") as file:
        file.write("\n".join(sorted(vocabulary, key=vocabulary.get)) + "\n")


def vocabulary_size(path):
    with open(path, encoding="utf-8") as file:
        return sum(1 for _ in file)


def write_sentencepiece(path, **ids):
    """A SentencePiece unigram model at `path` (which ends in `.model`)."""
    import sentencepiece

    ids = ids or dict(pad_id=0, unk_id=1, bos_id=2, eos_id=3)
    sentencepiece.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus()),
        model_prefix=str(path).removesuffix(".model"),
        vocab_size=300,
        character_coverage=1.0,
        minloglevel=2,
        **ids,
    )
    os.remove(str(path).removesuffix(".model") + ".vocab")


def write_google(directory, config_name, checkpoint_name, **fields):
    """A Google-format release: config, TF checkpoint and `vocab.txt`."""
    os.makedirs(directory)
    write_vocabulary(os.path.join(directory, "vocab.txt"))
    config = dict(BERT, vocab_size=vocabulary_size(os.path.join(directory, "vocab.txt")), **fields)
    with open(os.path.join(directory, config_name), "w") as file:
        json.dump(config, file, indent=2)
    write_tf_checkpoint(os.path.join(directory, checkpoint_name), google_bert_arrays(config))


def write_google_bert(directory):
    write_google(directory, "bert_config.json", "bert_model.ckpt")


def write_roberta_plus(directory):
    # Queries and keys twice as wide as the values' 8; a 16-wide embedding.
    write_google(directory, "bert_config.json", "bert_model.ckpt",
                 attention_key_size=16, embedding_size=16)


def write_albert(directory):
    write_google(directory, "albert_config.json", "albert_model.ckpt",
                 embedding_size=16, num_hidden_groups=1, inner_group_num=1)


def write_hf_bert(directory):
    """A Hugging Face `BertForPreTraining` directory with its `vocab.txt`."""
    import torch
    import transformers

    os.makedirs(directory)
    write_vocabulary(os.path.join(directory, "vocab.txt"))
    torch.manual_seed(0)
    size = vocabulary_size(os.path.join(directory, "vocab.txt"))
    transformers.BertForPreTraining(transformers.BertConfig(vocab_size=size, **BERT)).save_pretrained(directory)


def write_hf_gpt2(directory):
    """A Hugging Face GPT-2 directory with a byte-level BPE (`vocab.json`,
    `merges.txt`) whose last id is `<|endoftext|>`, as GPT-2's."""
    import torch
    import transformers
    from tokenizers import ByteLevelBPETokenizer

    os.makedirs(directory)
    trainer = ByteLevelBPETokenizer()
    trainer.train_from_iterator(corpus(), vocab_size=400, show_progress=False)
    trainer.save_model(directory)
    vocab_path = os.path.join(directory, "vocab.json")
    with open(vocab_path, encoding="utf-8") as file:
        vocabulary = json.load(file)
    end = vocabulary.setdefault("<|endoftext|>", len(vocabulary))
    with open(vocab_path, "w", encoding="utf-8") as file:
        json.dump(vocabulary, file, ensure_ascii=False)
    torch.manual_seed(0)
    config = transformers.GPT2Config(
        vocab_size=len(vocabulary), n_positions=128, n_embd=32, n_layer=1, n_head=4,
        bos_token_id=end, eos_token_id=end,
    )
    transformers.GPT2LMHeadModel(config).save_pretrained(directory)


def write_hf_t5(directory):
    """A Hugging Face T5 (v1.0) directory with its `spiece.model`."""
    import torch
    import transformers

    os.makedirs(directory)
    write_sentencepiece(os.path.join(directory, "spiece.model"), pad_id=0, eos_id=1, unk_id=2, bos_id=-1)
    torch.manual_seed(0)
    config = transformers.T5Config(
        vocab_size=300 + 100, d_model=32, d_kv=8, d_ff=64, num_layers=1, num_heads=4,
        feed_forward_proj="relu", decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
    )
    transformers.T5ForConditionalGeneration(config).save_pretrained(directory)


# Name -> writer(path). A name ending in "/" is a directory: a page's code
# mentions it as "NAME", "NAME/" or "NAME/a file".
FILES = {
    "vocab.txt": write_vocabulary,
    "spm.model": write_sentencepiece,
    "uncased_L-12_H-768_A-12/": write_google_bert,
    "roberta_plus/": write_roberta_plus,
    "albert_base_zh/": write_albert,
    "bert-base-uncased/": write_hf_bert,
    "gpt2/": write_hf_gpt2,
    "t5-small/": write_hf_t5,
}


def named_in(code):
    """The names of `FILES` that `code` mentions in a string literal."""
    found = []
    for name in FILES:
        if name.endswith("/"):
            pattern = r"""["']""" + re.escape(name[:-1]) + r"""(/|["'])"""
        else:
            pattern = r"""["']""" + re.escape(name) + r"""["']"""
        if re.search(pattern, code):
            found.append(name)
    return found


def prepare(code, workdir, cache):
    """Writes each file `code` names into `workdir`, made in `cache` once."""
    for name in named_in(code):
        cached = os.path.join(cache, name.rstrip("/"))
        if not os.path.exists(cached):
            # Written aside and moved in whole: a writer that fails leaves
            # nothing half-made for the next page.
            staging = os.path.join(cache, ".staging")
            shutil.rmtree(staging, ignore_errors=True)
            os.makedirs(staging)
            FILES[name](os.path.join(staging, name.rstrip("/")))
            os.replace(os.path.join(staging, name.rstrip("/")), cached)
        target = os.path.join(workdir, name.rstrip("/"))
        if name.endswith("/"):
            shutil.copytree(cached, target)
        else:
            shutil.copyfile(cached, target)
