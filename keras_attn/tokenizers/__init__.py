"""Tokenizers: BERT WordPiece, SentencePiece, T5, GPT-2's byte-level BPE and
a Hugging Face folder's tokenizer.json, with one interface."""

from keras_attn.tokenizers.byte_level_bpe_tokenizer import BpeTokenizer
from keras_attn.tokenizers.huggingface_tokenizer import HuggingFaceTokenizer
from keras_attn.tokenizers.sentencepiece_tokenizer import SpTokenizer
from keras_attn.tokenizers.t5_tokenizer import T5Tokenizer
from keras_attn.tokenizers.wordpiece_tokenizer import Tokenizer
from keras_attn.tokenizers.wordpiece_tokenizer import load_vocab
