"""A LLaMA-style SentencePiece BPE `tokenizer.model` as a `tokenizers`
pipeline, built as transformers 5 builds `LlamaTokenizer` from it (checked
against transformers 5.24), so a folder without `tokenizer.json` encodes
and decodes as `AutoTokenizer` does."""

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
