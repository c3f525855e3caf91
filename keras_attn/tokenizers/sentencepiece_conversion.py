"""A LLaMA-style SentencePiece BPE `tokenizer.model`, or DeBERTa-v2/v3's
Unigram `spm.model`, as a `tokenizers` pipeline, built as transformers 5
builds `LlamaTokenizer` or `DebertaV2Tokenizer` from it (checked against
transformers 5.24), so a folder without `tokenizer.json` encodes and
decodes as `AutoTokenizer` does."""

from keras_attn.tokenizers.base_tokenizer import check_file

# sentencepiece_model.proto's ModelType and SentencePiece.Type values.
BPE_MODEL = 2
CONTROL_PIECE = 3
USER_DEFINED_PIECE = 4


def read_model_proto(path):
    """The parsed `ModelProto` of a SentencePiece model file; errors name it."""
    path = check_file(path, "SentencePiece model")
    try:
        from sentencepiece import sentencepiece_model_pb2
    except ImportError as error:
        raise ImportError(
            f"Reading SentencePiece model {path!r} piece by piece needs the `protobuf` "
            f"package (pip install protobuf): {error}"
        ) from None
    proto = sentencepiece_model_pb2.ModelProto()
    with open(path, "rb") as file:
        data = file.read()
    try:
        proto.ParseFromString(data)
    except Exception as error:  # protobuf's DecodeError and its C++ variants
        raise ValueError(
            f"SentencePiece model {path!r} could not be read as a SentencePiece "
            f"`.model` file: {error}"
        ) from None
    if not proto.pieces:
        raise ValueError(f"SentencePiece model {path!r} holds no pieces.")
    return proto


def bpe_merges(vocabulary):
    """transformers' `generate_merges` without scores: every split of a
    piece into two pieces, ordered by the merged piece's id, then the
    left and right pieces' ids, then their lengths."""
    merges = []
    for merged, merged_id in vocabulary.items():
        splits = [
            (merged[:index], merged[index:], merged_id)
            for index in range(1, len(merged))
            if merged[:index] in vocabulary and merged[index:] in vocabulary
        ]
        merges += sorted(splits, key=lambda split: (vocabulary[split[0]], vocabulary[split[1]]))
    merges.sort(key=lambda merge: (merge[2], len(merge[0]), len(merge[1])))
    return [(left, right) for left, right, _ in merges]


def llama_pipeline(path, legacy):
    """`(tokenizers.Tokenizer, proto)` for the SentencePiece BPE model at
    `path`: its pieces as a byte-fallback BPE, a `▁` put before the text
    (before every text between added tokens where `legacy`), control
    pieces (`<s>`, `</s>`) and `<unk>` as special added tokens and
    user-defined pieces as added tokens, and LLaMA's decoder."""
    from tokenizers import AddedToken
    from tokenizers import Tokenizer
    from tokenizers import decoders
    from tokenizers import models
    from tokenizers import pre_tokenizers

    proto = read_model_proto(path)
    if proto.trainer_spec.model_type != BPE_MODEL:
        raise ValueError(
            f"SentencePiece model {path!r} is not a BPE model (model_type "
            f"{proto.trainer_spec.model_type}); LLaMA-2's is. Load other SentencePiece "
            "models with keras_attn.SpTokenizer."
        )
    vocabulary = {piece.piece: index for index, piece in enumerate(proto.pieces)}
    fast = Tokenizer(
        models.BPE(vocab=vocabulary, merges=bpe_merges(vocabulary), fuse_unk=True, byte_fallback=True)
    )
    fast.pre_tokenizer = pre_tokenizers.Metaspace(
        replacement="\u2581", prepend_scheme="always" if legacy else "first", split=False
    )
    fast.decoder = decoders.Sequence(
        [
            decoders.Replace("\u2581", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(content=" ", left=1),
        ]
    )
    unknown = proto.trainer_spec.unk_id
    fast.add_tokens(
        [
            AddedToken(
                piece.piece,
                normalized=False,
                special=piece.type == CONTROL_PIECE or index == unknown,
            )
            for index, piece in enumerate(proto.pieces)
            if piece.type in (CONTROL_PIECE, USER_DEFINED_PIECE) or index == unknown
        ]
    )
    return fast, proto


def deberta_pipeline(path, do_lower_case=False, split_by_punct=False, add_prefix_space=True,
                     cls_token="[CLS]", sep_token="[SEP]", special_tokens=()):
    """`(tokenizers.Tokenizer, proto)` for DeBERTa-v2/v3's SentencePiece
    `spm.model` at `path`, as transformers 5 builds `DebertaV2Tokenizer`
    from it: the pieces and their scores as a Unigram model (unknown piece
    the model's `[UNK]`, else its `unk_id`); whitespace runs, newlines and
    tabs as one space, NFC, trailing spaces stripped (lower-cased first with
    `do_lower_case`); punctuation split off with `split_by_punct`; a `▁`
    before every word (`add_prefix_space`, else before the first only) and
    the same `Metaspace` decoding; `special_tokens` (the configured
    `[CLS]`, `[SEP]`, ...; those the model has) as special added tokens, and
    `cls $A sep` / `cls $A sep $B sep` around texts (`cls_token`,
    `sep_token`) where the model has both."""
    from tokenizers import AddedToken
    from tokenizers import Regex
    from tokenizers import Tokenizer
    from tokenizers import decoders
    from tokenizers import models
    from tokenizers import normalizers
    from tokenizers import pre_tokenizers
    from tokenizers import processors

    proto = read_model_proto(path)
    vocabulary = [(piece.piece, piece.score) for piece in proto.pieces]
    pieces = [piece for piece, _ in vocabulary]
    unknown = pieces.index("[UNK]") if ("[UNK]", 0.0) in vocabulary else proto.trainer_spec.unk_id
    fast = Tokenizer(models.Unigram(vocabulary, unk_id=unknown, byte_fallback=False))
    steps = [normalizers.Lowercase()] if do_lower_case else []
    steps += [
        normalizers.Replace(Regex(r"\s{2,}|[\n\r\t]"), " "),
        normalizers.NFC(),
        normalizers.Strip(left=False, right=True),
    ]
    fast.normalizer = normalizers.Sequence(steps)
    scheme = "always" if add_prefix_space else "first"
    splits = [pre_tokenizers.Punctuation(behavior="isolated")] if split_by_punct else []
    fast.pre_tokenizer = pre_tokenizers.Sequence(
        splits + [pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme=scheme)]
    )
    fast.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme=scheme)
    present = [token for token in dict.fromkeys(special_tokens) if token in pieces]
    fast.add_special_tokens([AddedToken(token, special=True) for token in present])
    if cls_token in pieces and sep_token in pieces:
        fast.post_processor = processors.TemplateProcessing(
            single=f"{cls_token}:0 $A:0 {sep_token}:0",
            pair=f"{cls_token}:0 $A:0 {sep_token}:0 $B:1 {sep_token}:1",
            special_tokens=[(token, pieces.index(token)) for token in {cls_token, sep_token}],
        )
    return fast, proto
