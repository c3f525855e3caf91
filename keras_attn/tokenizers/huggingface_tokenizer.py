"""A checkpoint folder's `tokenizer.json` (or LLaMA's SentencePiece
`tokenizer.model`, or DeBERTa-v2/v3's `spm.model`) on the `tokenizers`
package, with the special tokens of its `tokenizer_config.json`."""

import os

from keras_attn.tokenizers.base_tokenizer import BaseTokenizer
from keras_attn.tokenizers.base_tokenizer import check_file
from keras_attn.tokenizers.base_tokenizer import check_integer
from keras_attn.tokenizers.base_tokenizer import check_text
from keras_attn.tokenizers.base_tokenizer import read_json
from keras_attn.tokenizers.base_tokenizer import tokenizer_file
from keras_attn.tokenizers.base_tokenizer import vocabulary_of
from keras_attn.tokenizers.sentencepiece_conversion import deberta_pipeline
from keras_attn.tokenizers.sentencepiece_conversion import llama_pipeline

SPECIAL_ROLES = ("bos_token", "eos_token", "pad_token", "unk_token")
# The tokenizer classes whose tokenizer.model transformers converts as LLaMA's.
LLAMA_CLASSES = {"LlamaTokenizer", "LlamaTokenizerFast"}
# The tokenizer classes whose spm.model transformers converts as DeBERTa-v2's
# (a Unigram model), with the special tokens DebertaV2Tokenizer defaults to.
DEBERTA_CLASSES = {"DebertaV2Tokenizer", "DebertaV2TokenizerFast"}
DEBERTA_TOKENS = {
    "bos_token": "[CLS]", "eos_token": "[SEP]", "unk_token": "[UNK]", "pad_token": "[PAD]",
    "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]",
}


def _token_content(value, path, key):
    """The text of a special token as transformers writes it: a str, an
    `AddedToken` dict (`{"content": ...}`) or null."""
    if value is None or isinstance(value, str):
        return value or None
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"] or None
    raise ValueError(
        f"{path!r}: {key} must be a str, null or an object with a str `content`, "
        f"found {value!r}."
    )


def _read_settings(directory):
    """`(special tokens by role, settings, the file each came from)` from a
    folder's `special_tokens_map.json` and `tokenizer_config.json` (the
    latter wins, as in transformers); either may be absent."""
    tokens, settings, sources = {}, {}, {}
    for name in ("special_tokens_map.json", "tokenizer_config.json"):
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        document = read_json(check_file(path, "Tokenizer settings file"), "Tokenizer settings file")
        if not isinstance(document, dict):
            raise ValueError(
                f"Tokenizer settings file {path!r} must hold a JSON object, found a "
                f"JSON {type(document).__name__}."
            )
        for role in SPECIAL_ROLES:
            if role in document:
                tokens[role] = _token_content(document[role], path, role)
                sources[role] = path
        if isinstance(document.get("tokenizer_class"), str):
            settings["tokenizer_class"] = document["tokenizer_class"]
        # DeBERTa's template tokens, read by its spm.model conversion only.
        for role in ("cls_token", "sep_token", "mask_token"):
            if role in document:
                settings[role] = _token_content(document[role], path, role)
        for key in ("add_bos_token", "add_eos_token", "legacy", "clean_up_tokenization_spaces",
                    "do_lower_case", "split_by_punct", "add_prefix_space"):
            if key in document:
                if not isinstance(document[key], bool):
                    raise ValueError(
                        f"Tokenizer settings file {path!r}: {key} must be true or false, "
                        f"found {document[key]!r}."
                    )
                settings[key] = document[key]
                sources[key] = path
    return tokens, settings, sources


def _clean_up_tokenization(text):
    """transformers' `clean_up_tokenization`: the spaces WordPiece decoding
    leaves before punctuation and English contractions removed."""
    for spaced, joined in (
        (" .", "."), (" ?", "?"), (" !", "!"), (" ,", ","), (" ' ", "'"),
        (" n't", "n't"), (" 'm", "'m"), (" 's", "'s"), (" 've", "'ve"), (" 're", "'re"),
    ):
        text = text.replace(spaced, joined)
    return text


class HuggingFaceTokenizer(BaseTokenizer):
    """The tokenizer of a Hugging Face checkpoint folder: its `tokenizer.json`
    run by the `tokenizers` package (ids and decoded text equal
    `transformers.AutoTokenizer`'s for the same folder), with the special
    tokens and settings of its `tokenizer_config.json` and
    `special_tokens_map.json`.

    A folder with LLaMA-2's SentencePiece `tokenizer.model` and no
    `tokenizer.json` (a `LlamaTokenizer` config) is converted as transformers
    5 converts it (a byte-fallback BPE, the config's `legacy`,
    `add_bos_token` and `add_eos_token`); `keras_attn.SpTokenizer` runs
    SentencePiece itself. A DeBERTa-v2/v3 folder's `spm.model` (a
    `DebertaV2Tokenizer` config) is converted as transformers 5 converts it
    (`sentencepiece_conversion.deberta_pipeline`).

    `bos_token`, `eos_token`, `pad_token` and `unk_token` are read from
    `tokenizer_config.json` (else `special_tokens_map.json`) and must be
    tokens of the tokenizer. The tokens added around a text are the
    `tokenizer.json` post-processor's, as in transformers 5; added tokens
    typed in a text are encoded as their single id.

    Args:
        path: a checkpoint folder holding `tokenizer.json` (preferred),
            `tokenizer.model` or `spm.model`, or the path of one of them
            (the settings files are read from its folder).

    Raises:
        FileNotFoundError: the folder has none of the files (the message
            names the folder), or the file does not exist.
        ValueError: a `tokenizer.json` that is empty, not JSON or not
            loadable; a `tokenizer.model` or `spm.model` that is unreadable or
            without a LLaMA (BPE) or DeBERTa-v2 `tokenizer_class`; a settings
            file naming a special token the tokenizer lacks (the message names
            the file, the key and the token).
        ImportError: reading a `tokenizer.model` or `spm.model` needs
            `protobuf`.

    Example:

    >>> tokenizer = keras_attn.HuggingFaceTokenizer("Qwen2.5-0.5B/")
    >>> token_ids, _ = tokenizer.encode("你好, world 👋")
    >>> tokenizer.decode(token_ids)
    '你好, world 👋'
    """

    def __init__(self, path):
        from tokenizers import Tokenizer as FastTokenizer

        if not isinstance(path, (str, os.PathLike)):
            raise TypeError(
                "path must be a checkpoint folder or the path of a tokenizer.json or tokenizer.model (str or "
                f"os.PathLike), got {type(path).__name__}: {path!r}."
            )
        path = tokenizer_file(path, [
            ("tokenizer.json", "tokenizer.json"),
            ("tokenizer.model", "SentencePiece tokenizer.model"),
            ("spm.model", "SentencePiece spm.model"),
        ])
        tokens, settings, sources = _read_settings(os.path.dirname(path))
        tokenizer_class = settings.get("tokenizer_class")
        deberta = path.endswith(".model") and tokenizer_class in DEBERTA_CLASSES
        if deberta:
            special = {role: settings.get(role, tokens.get(role, token))
                       for role, token in DEBERTA_TOKENS.items()}
            fast, proto = deberta_pipeline(
                path, settings.get("do_lower_case", False), settings.get("split_by_punct", False),
                settings.get("add_prefix_space", True), special["cls_token"],
                special["sep_token"], special_tokens=[token for token in special.values() if token],
            )
            self._model_type = "Unigram"
            pieces = {piece.piece for piece in proto.pieces}
            for role in SPECIAL_ROLES:
                if role not in tokens and special[role] in pieces:
                    tokens[role] = special[role]
        elif path.endswith(".model"):
            if tokenizer_class not in LLAMA_CLASSES:
                raise ValueError(
                    f"SentencePiece model {path!r}: HuggingFaceTokenizer reads a SentencePiece "
                    f"model as transformers' LlamaTokenizer or DebertaV2Tokenizer does, which needs "
                    f"a tokenizer_config.json beside it with tokenizer_class one of "
                    f"{sorted(LLAMA_CLASSES | DEBERTA_CLASSES)} (found {tokenizer_class!r}). Load "
                    f"other SentencePiece models with keras_attn.SpTokenizer."
                )
            fast, proto = llama_pipeline(path, settings.get("legacy", False))
            self._model_type = "BPE"
            unknown = proto.trainer_spec.unk_id
            for role, index in (("bos_token", proto.trainer_spec.bos_id), ("eos_token", proto.trainer_spec.eos_id)):
                if role not in tokens and index >= 0:
                    tokens[role] = proto.pieces[index].piece
            tokens.setdefault("unk_token", proto.pieces[unknown].piece if unknown >= 0 else None)
        else:
            path = check_file(path, "Tokenizer file")
            description = read_json(path, "Tokenizer file")
            if not isinstance(description, dict) or not isinstance(description.get("model"), dict):
                raise ValueError(
                    f"Tokenizer file {path!r} is not a `tokenizers` tokenizer: it has no "
                    "`model` object."
                )
            try:
                fast = FastTokenizer.from_file(path)
            except Exception as error:  # the tokenizers package raises plain Exception
                raise ValueError(f"Tokenizer file {path!r} could not be loaded: {error}") from None
            self._model_type = description["model"].get("type")
            if tokens.get("unk_token") is None:
                tokens["unk_token"] = description["model"].get("unk_token")
        self.path = path
        self._fast = fast
        self._vocab, self._inverse = vocabulary_of(fast, path)
        self._special = {
            token.content for token in fast.get_added_tokens_decoder().values() if token.special
        }

        for role, token in tokens.items():
            if token is not None and token not in self._vocab:
                where = f"Tokenizer settings file {sources[role]!r}" if role in sources else f"Tokenizer {path!r}"
                raise ValueError(f"{where}: {role} {token!r} is not a token of {path!r}.")
        self._bos = tokens.get("bos_token")
        self._eos = tokens.get("eos_token")
        self._pad = tokens.get("pad_token")
        self._unk = tokens.get("unk_token")
        self._mask = None
        # transformers adds a configured special token that the file has as a
        # plain vocabulary token as a special added token: split out of text.
        added = {token.content for token in fast.get_added_tokens_decoder().values()}
        missing = [token for token in tokens.values() if token and token not in added]
        if missing:
            fast.add_special_tokens(sorted(set(missing)))
        self._special |= {token for token in tokens.values() if token}
        self._clean_up = settings.get("clean_up_tokenization_spaces", False) and self._model_type != "BPE"
        if path.endswith(".model") and not deberta:
            self._use_template(settings.get("add_bos_token", False), settings.get("add_eos_token", False))
        elif fast.post_processor is None:
            # transformers 5 ignores add_bos_token/add_eos_token beside a
            # tokenizer.json and gives one without a post-processor `$A`.
            self._use_template(False, False)
        self._cls, self._sep = self._start_and_end()

    def _use_template(self, add_bos, add_eos):
        """transformers' `update_post_processor`: `bos $A eos` and `bos $A eos
        bos $B eos`, with the tokens the config adds."""
        from tokenizers import processors

        add_bos = add_bos and self._bos is not None
        add_eos = add_eos and self._eos is not None
        single = f"{(self._bos + ':0 ') if add_bos else ''}$A:0{(' ' + self._eos + ':0') if add_eos else ''}"
        pair = f"{single}{(' ' + self._bos + ':1') if add_bos else ''} $B:1{(' ' + self._eos + ':1') if add_eos else ''}"
        special_tokens = [(self._bos, self._vocab[self._bos])] if add_bos else []
        special_tokens += [(self._eos, self._vocab[self._eos])] if add_eos else []
        self._fast.post_processor = processors.TemplateProcessing(
            single=single, pair=pair, special_tokens=special_tokens
        )

    def _start_and_end(self):
        """The one special token put before and after a single text (None
        for none), read off the post-processor: `tokenize` and `rematch`
        use them."""
        encoding = self._fast.post_process(self._fast.encode("a", add_special_tokens=False))
        mask = encoding.special_tokens_mask
        text = [i for i, special in enumerate(mask) if not special]
        first, last = (text[0], text[-1]) if text else (len(mask), len(mask))
        before, after = encoding.tokens[:first], encoding.tokens[last + 1 :]
        if len(before) > 1 or len(after) > 1:
            # Several tokens around a text: tokenize/rematch see only the text;
            # encode still adds them all through the post-processor.
            return None, None
        return (before or [None])[0], (after or [None])[0]

    # Special tokens ------------------------------------------------------

    @property
    def bos_id(self):
        """The id of the configured `bos_token`; a ValueError where there is none."""
        return self._special_id("_bos", "beginning-of-sequence (bos_token)")

    @property
    def eos_id(self):
        """The id of the configured `eos_token`; a ValueError where there is none."""
        return self._special_id("_eos", "end-of-sequence (eos_token)")

    @property
    def end_id(self):
        """The id that ends generation: `eos_id`."""
        return self.eos_id

    @property
    def special_tokens(self):
        """The added tokens marked special and the configured special tokens."""
        return set(self._special)

    # Encoding ------------------------------------------------------------

    def _pieces(self, text):
        encoding = self._fast.encode(text, add_special_tokens=False)
        return list(encoding.tokens), list(encoding.offsets)

    def _encoding(self, first, second, maxlen):
        check_text(first, "first")
        if second is not None:
            check_text(second, "second")
        if maxlen is None:
            return self._fast.encode(first, second, add_special_tokens=True)
        maxlen = check_integer(maxlen, "maxlen (or None)")
        specials = self._fast.num_special_tokens_to_add(second is not None)
        minimum = max(specials, 1)
        if maxlen < minimum:
            raise ValueError(
                f"maxlen={maxlen} is too small: the minimum is {minimum}, room for the "
                f"{specials} special tokens of {'a text pair' if second is not None else 'one text'}."
            )
        # The package's own longest-first truncation, which transformers uses.
        self._fast.enable_truncation(maxlen, strategy="longest_first")
        try:
            return self._fast.encode(first, second, add_special_tokens=True)
        finally:
            self._fast.no_truncation()

    def encode(self, first, second=None, maxlen=None):
        """Token ids and type ids of a text or a text pair, with the special
        tokens transformers adds.

        Args:
            first: the first text, a str.
            second: optional second text, a str.
            maxlen: total length including special tokens; texts lose
                tokens from their end as transformers' longest-first
                truncation cuts them.

        Returns:
            `(token_ids, segment_ids)`, two lists of ints.
        """
        encoding = self._encoding(first, second, maxlen)
        return list(encoding.ids), list(encoding.type_ids)

    def tokenize(self, text, maxlen=None):
        """The tokens of `encode(text, maxlen=maxlen)`."""
        return list(self._encoding(text, None, maxlen).tokens)

    def decode(self, ids, skip_special_tokens=True):
        """The text of `ids`, as transformers' `decode` writes it.

        Args:
            ids: token ids (ints, a NumPy array or a backend tensor); a
                ValueError names one outside `[0, vocab_size)`.
            skip_special_tokens: leave out special tokens (the default of
                every keras_attn tokenizer; transformers' default is False).
        """
        ids = [check_integer(token_id, "A token id") for token_id in ids]
        for token_id in ids:
            self.id_to_token(token_id)
        text = self._fast.decode(ids, skip_special_tokens=skip_special_tokens)
        return _clean_up_tokenization(text) if self._clean_up else text
