"""Tokenizers: BERT WordPiece and SentencePiece, with one interface."""

from keras_attn.tokenizers.sentencepiece_tokenizer import SpTokenizer
from keras_attn.tokenizers.wordpiece_tokenizer import Tokenizer
from keras_attn.tokenizers.wordpiece_tokenizer import load_vocab
