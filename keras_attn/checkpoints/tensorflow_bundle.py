"""TensorFlow's checkpoint format, read with numpy alone.

A TensorFlow checkpoint `PREFIX` (Google's `bert_model.ckpt`, what
`tf.train.Checkpoint` and `tf.compat.v1.train.Saver` write) is a "tensor
bundle" of files:

- `PREFIX.index`: a table in LevelDB's SSTable layout (data blocks of
  prefix-compressed sorted keys, an index block, an empty metaindex block,
  a 48-byte footer with magic `0xdb4775248b80fb57`; every block ends with a
  compression byte and a masked CRC32C).
- The table's empty key holds a `BundleHeaderProto`; every other key is a
  variable name holding a `BundleEntryProto` (dtype, shape, data file,
  offset, size, masked CRC32C, slices).
- `PREFIX.data-0000N-of-0000M`: the variables' bytes.

Both protobuf messages are decoded here from the wire format, and CRC32C is
computed with numpy, so reading needs neither TensorFlow nor protobuf. A
file that is truncated or damaged raises `CheckpointError` naming the file
and, where known, the variable.
"""

import contextlib
import functools
import itertools
import os

import numpy as np

from keras_attn.checkpoints.readers import CheckpointError

TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_SIZE = 48
BLOCK_TRAILER_SIZE = 5  # compression byte, masked CRC32C
# TensorFlow's `DataType` enum -> numpy dtype, little-endian as stored.
# bfloat16 is read as its 16 bits and widened to float32 (exactly).
DTYPES = {
    1: np.dtype("<f4"),  # DT_FLOAT
    2: np.dtype("<f8"),  # DT_DOUBLE
    3: np.dtype("<i4"),  # DT_INT32
    4: np.dtype("u1"),  # DT_UINT8
    5: np.dtype("<i2"),  # DT_INT16
    6: np.dtype("i1"),  # DT_INT8
    8: np.dtype("<c8"),  # DT_COMPLEX64
    9: np.dtype("<i8"),  # DT_INT64
    10: np.dtype("?"),  # DT_BOOL
    14: np.dtype("<u2"),  # DT_BFLOAT16
    17: np.dtype("<u2"),  # DT_UINT16
    18: np.dtype("<c16"),  # DT_COMPLEX128
    19: np.dtype("<f2"),  # DT_HALF
    22: np.dtype("<u4"),  # DT_UINT32
    23: np.dtype("<u8"),  # DT_UINT64
}
DT_STRING = 7
DT_BFLOAT16 = 14
DTYPE_NAMES = {7: "string", 11: "qint8", 12: "quint8", 13: "qint32", 15: "qint16",
               16: "quint16", 20: "resource", 21: "variant"}
# The newest format version this reader knows (TensorFlow's
# `kTensorBundleVersion`); a checkpoint that needs a newer reader says so in
# its header's `min_consumer`.
BUNDLE_VERSION = 1


def data_file(prefix, shard, num_shards):
    """The name of data file `shard` of a checkpoint of `num_shards`."""
    return f"{prefix}.data-{shard:05d}-of-{num_shards:05d}"


class TensorBundle:
    """Name -> numpy array access to one TensorFlow checkpoint.

    Opening reads and checks `PREFIX.index` only; `read` reads one
    variable's bytes from its data file and checks their CRC32C.

    Args:
        prefix: the checkpoint prefix, e.g. `".../bert_model.ckpt"`.

    Raises:
        CheckpointError: the index is truncated, damaged, compressed, or
            of a newer format version (the message names the file).
        FileNotFoundError: the index, or a data file it names, is missing.

    Example:

    ```python
    bundle = TensorBundle("uncased_L-12_H-768_A-12/bert_model.ckpt")
    bundle.shape("bert/embeddings/word_embeddings")  # (30522, 768)
    bundle.read("bert/embeddings/word_embeddings")  # float32 array
    ```
    """

    def __init__(self, prefix):
        self.prefix = prefix
        self.index_file = prefix + ".index"
        entries = _read_table(self.index_file)
        if not entries or entries[0][0] != b"":
            raise CheckpointError(
                f"TensorFlow checkpoint index {self.index_file!r} has no header "
                "entry (its first key must be empty); it is damaged or not a "
                "checkpoint index."
            )
        with _naming(self.index_file, "the header entry"):
            header = _decode_header(entries[0][1])
        if header["min_consumer"] > BUNDLE_VERSION:
            raise CheckpointError(
                f"TensorFlow checkpoint {self.index_file!r} needs a reader of "
                f"format version {header['min_consumer']} or newer; this one "
                f"reads version {BUNDLE_VERSION}."
            )
        self._num_shards = header["num_shards"]
        self._big_endian = header["endianness"] == 1
        self._entries = {}  # variable name -> entry
        self._slices = {}  # encoded slice key -> entry of that slice's data
        for key, value in entries[1:]:
            with _naming(self.index_file, f"the entry of {key!r}"):
                if key.startswith(b"\x00"):  # one slice of a variable saved in slices
                    self._slices[key] = _decode_entry(value)
                    continue
                name = key.decode("utf-8")
                self._entries[name] = _decode_entry(value)
        for what, entry in self._stored_entries():
            if not 0 <= entry["shard_id"] < self._num_shards:
                raise CheckpointError(
                    f"TensorFlow checkpoint index {self.index_file!r}: {what} is in "
                    f"data file {entry['shard_id']}, but the checkpoint has "
                    f"{self._num_shards}."
                )
        for shard in sorted({entry["shard_id"] for _, entry in self._stored_entries()}):
            path = data_file(prefix, shard, self._num_shards)
            if not os.path.isfile(path):
                raise FileNotFoundError(
                    f"Data file {path!r} of TensorFlow checkpoint {prefix!r} "
                    "does not exist."
                )

    def _stored_entries(self):
        """`(what, entry)` for every entry whose bytes are in a data file."""
        for name, entry in self._entries.items():
            if not entry["slices"]:
                yield repr(name), entry
        for key, entry in self._slices.items():
            yield f"the slice {key!r}", entry

    def names(self):
        """Every variable name, sorted (slices of a variable saved in slices
        are not names: the variable is, with its full shape)."""
        return sorted(self._entries)

    def __contains__(self, name):
        return name in self._entries

    def shape(self, name):
        """The stored shape of `name`, read from the index alone."""
        return tuple(self._entry(name)["shape"])

    def read(self, name):
        """The array stored under `name`.

        Numbers keep their dtype (in the machine's byte order); bfloat16 is
        widened to float32, exactly; strings are an object array of `bytes`.

        Raises:
            KeyError: `name` is not stored.
            CheckpointError: the data file is truncated, its bytes do not
                match the stored CRC32C, or the dtype has no numpy
                equivalent (the message names the file and the variable).
        """
        entry = self._entry(name)
        if entry["slices"]:
            return self._read_slices(name, entry)
        return self._read_stored(name, entry)

    def _entry(self, name):
        if name not in self._entries:
            raise KeyError(f"{name!r} is not stored in TensorFlow checkpoint {self.prefix!r}.")
        return self._entries[name]

    def _read_stored(self, name, entry):
        path = data_file(self.prefix, entry["shard_id"], self._num_shards)
        dtype_code, shape = entry["dtype"], tuple(entry["shape"])
        count = int(np.prod(shape, dtype=np.int64))
        if dtype_code == DT_STRING:
            with _naming(path, f"variable {name!r}"):
                return _decode_strings(
                    _read_bytes(path, name, entry), count, entry["crc32c"],
                    self._big_endian,
                ).reshape(shape)
        if dtype_code not in DTYPES:
            raise CheckpointError(
                f"Variable {name!r} of TensorFlow checkpoint {self.prefix!r} has "
                f"dtype {DTYPE_NAMES.get(dtype_code, dtype_code)}, which has no "
                "numpy equivalent to read it as."
            )
        dtype = DTYPES[dtype_code]
        if entry["size"] != count * dtype.itemsize:
            raise CheckpointError(
                f"TensorFlow checkpoint index {self.index_file!r}: variable "
                f"{name!r} of shape {shape} and dtype {dtype} needs "
                f"{count * dtype.itemsize} bytes, but its entry says {entry['size']}."
            )
        raw = _read_bytes(path, name, entry)
        found = mask(crc32c(raw))
        if found != entry["crc32c"]:
            raise CheckpointError(
                f"Variable {name!r} in TensorFlow checkpoint data file {path!r} "
                f"is damaged: its bytes have checksum {found:#010x}, the index "
                f"expects {entry['crc32c']:#010x}."
            )
        array = raw.view(dtype.newbyteorder(">") if self._big_endian else dtype)
        array = array.astype(dtype.newbyteorder("="), copy=False).reshape(shape)
        if dtype_code == DT_BFLOAT16:
            array = (array.astype(np.uint32) << 16).view(np.float32)
        return array

    def _read_slices(self, name, entry):
        """A variable saved in slices, assembled from them."""
        shape = tuple(entry["shape"])
        result, covered = None, np.zeros(shape, bool)
        for extents in entry["slices"]:
            region = tuple(
                slice(0, size) if length is None else slice(start, start + length)
                for (start, length), size in zip(extents, shape)
            )
            key = encode_slice_key(name, extents)
            if len(extents) != len(shape) or key not in self._slices:
                raise CheckpointError(
                    f"TensorFlow checkpoint index {self.index_file!r} lists slice "
                    f"{_slice_text(extents)} of {name!r}, but holds no data for it."
                )
            part = self._read_stored(f"{name} {_slice_text(extents)}", self._slices[key])
            if result is None:
                result = np.zeros(shape, part.dtype)
            if part.size != result[region].size:
                raise CheckpointError(
                    f"TensorFlow checkpoint index {self.index_file!r}: slice "
                    f"{_slice_text(extents)} of {name!r} holds shape {part.shape}, "
                    f"which does not fit the slice of {shape}."
                )
            result[region] = part.reshape(result[region].shape)
            covered[region] = True
        if result is None or not covered.all():
            raise CheckpointError(
                f"TensorFlow checkpoint {self.prefix!r}: the slices of {name!r} "
                f"do not cover its shape {shape}."
            )
        return result


def _slice_text(extents):
    return ":".join("-" if length is None else f"{start},{length}" for start, length in extents)


def _read_bytes(path, name, entry):
    """The `entry["size"]` bytes at `entry["offset"]` of `path`, as uint8."""
    offset, size = entry["offset"], entry["size"]
    data = np.empty(size, np.uint8)
    try:
        with open(path, "rb") as file:
            file.seek(offset)
            got = file.readinto(memoryview(data))
    except OSError as error:
        raise CheckpointError(
            f"Cannot read {name!r} from TensorFlow checkpoint data file {path!r}: {error}"
        ) from error
    if got != size:
        raise CheckpointError(
            f"TensorFlow checkpoint data file {path!r} is truncated: {name!r} is "
            f"stored at bytes {offset}-{offset + size} but the file holds "
            f"{os.path.getsize(path)} bytes."
        )
    return data


def _decode_strings(data, count, stored_crc, big_endian):
    """A string tensor's bytes: `count` varint64 lengths, the masked CRC32C
    of the lengths (each as uint32, or uint64 when longer), the strings.
    The entry's CRC32C covers those lengths, that checksum and the strings."""
    buffer = data.tobytes()
    if count == 0 and not buffer:
        return np.empty(0, object)
    position, lengths, length_bytes = 0, [], bytearray()
    order = "big" if big_endian else "little"
    for _ in range(count):
        length, position = _varint(buffer, position)
        lengths.append(length)
        length_bytes += length.to_bytes(4 if length <= 0xFFFFFFFF else 8, order)
    if position + 4 > len(buffer):
        raise _Malformed("the string lengths run past the stored size (truncated)")
    checksum_bytes = buffer[position: position + 4]
    position += 4
    crc = crc32c(length_bytes)
    if mask(crc) != int.from_bytes(checksum_bytes, order):
        raise _Malformed("the checksum of the string lengths does not match (damaged)")
    crc = crc32c(checksum_bytes, crc)
    if position + sum(lengths) > len(buffer):
        raise _Malformed("the strings run past the stored size (truncated)")
    crc = crc32c(buffer[position: position + sum(lengths)], crc)
    result = np.empty(count, object)
    for index, length in enumerate(lengths):
        result[index] = buffer[position: position + length]
        position += length
    if mask(crc) != stored_crc:
        raise _Malformed("its bytes do not match the stored checksum (damaged)")
    return result


# -- The table (LevelDB's SSTable layout) -----------------------------------


def _read_table(path):
    """Every `(key, value)` of the table file `path`, in key order."""
    try:
        with open(path, "rb") as file:
            content = file.read()
    except FileNotFoundError:
        raise
    except OSError as error:
        raise CheckpointError(f"Cannot read TensorFlow checkpoint index {path!r}: {error}") from error
    if len(content) < FOOTER_SIZE:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path!r} is truncated: {len(content)} "
            f"bytes, fewer than its {FOOTER_SIZE}-byte footer."
        )
    magic = int.from_bytes(content[-8:], "little")
    if magic != TABLE_MAGIC:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path!r} does not end with the table "
            f"magic number {TABLE_MAGIC:#x} (found {magic:#x}): it is truncated "
            "or not a checkpoint index."
        )
    with _naming(path, "the footer"):
        footer = content[-FOOTER_SIZE:]
        _metaindex, position = _block_handle(footer, 0)
        index_handle, _ = _block_handle(footer, position)
    entries = []
    for index_key, handle in _block_entries(content, index_handle, path, "the index block"):
        with _naming(path, f"the index entry {index_key!r}"):
            data_handle, _ = _block_handle(handle, 0)
        entries.extend(_block_entries(content, data_handle, path, f"the data block at byte {data_handle[0]}"))
    for (previous, _), (key, _) in itertools.pairwise(entries):
        if not previous < key:
            raise CheckpointError(
                f"TensorFlow checkpoint index {path!r} is damaged: its keys are "
                f"not in order ({previous!r} before {key!r})."
            )
    return entries


def _block_handle(buffer, position):
    offset, position = _varint(buffer, position)
    size, position = _varint(buffer, position)
    return (offset, size), position


def _block_entries(content, handle, path, what):
    """The `(key, value)` pairs of the block at `handle` of the table file
    `content`: its trailer's checksum checked, its shared key prefixes
    expanded, its restart points checked to start full keys."""
    offset, size = handle
    end = offset + size + BLOCK_TRAILER_SIZE
    if end > len(content) - FOOTER_SIZE:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path!r} is truncated or damaged: "
            f"{what} spans bytes {offset}-{end}, past the table's end."
        )
    block = content[offset: offset + size]
    compression = content[offset + size]
    stored = int.from_bytes(content[offset + size + 1: end], "little")
    if mask(crc32c(content[offset: offset + size + 1])) != stored:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path!r} is damaged: {what} does not "
            "match its checksum."
        )
    if compression != 0:
        raise CheckpointError(
            f"TensorFlow checkpoint index {path!r}: {what} is compressed "
            f"(compression type {compression}); TensorFlow writes checkpoint "
            "tables uncompressed, and this reader reads only those."
        )
    with _naming(path, what):
        if size < 4:
            raise _Malformed("shorter than its restart count")
        restart_count = int.from_bytes(block[-4:], "little")
        restarts_start = size - 4 - 4 * restart_count
        if restart_count < 1 or restarts_start < 0:
            raise _Malformed(f"{restart_count} restart points do not fit in {size} bytes")
        restarts = {
            int.from_bytes(block[at: at + 4], "little")
            for at in range(restarts_start, size - 4, 4)
        }
        entries, key, position, full_keys = [], b"", 0, set()
        while position < restarts_start:
            start = position
            shared, position = _varint(block, position)
            unshared, position = _varint(block, position)
            value_size, position = _varint(block, position)
            if shared > len(key) or position + unshared + value_size > restarts_start:
                raise _Malformed(f"the entry at byte {start} runs past its block")
            key = key[:shared] + block[position: position + unshared]
            position += unshared
            entries.append((key, block[position: position + value_size]))
            position += value_size
            if shared == 0:
                full_keys.add(start)
        if not restarts <= full_keys:
            raise _Malformed("a restart point does not start a full key")
    return entries


# -- The protobuf messages (wire format) ------------------------------------


def _decode_header(buffer):
    """`BundleHeaderProto`: num_shards = 1, endianness = 2 (0 little, 1 big),
    version = 3 (`VersionDef`: producer = 1, min_consumer = 2)."""
    fields = _fields(buffer)
    version = _fields(_last(fields, 3, b""))
    return {
        "num_shards": _last(fields, 1, 0),
        "endianness": _last(fields, 2, 0),
        "min_consumer": _last(version, 2, 0),
    }


def _decode_entry(buffer):
    """`BundleEntryProto`: dtype = 1, shape = 2 (`TensorShapeProto`), shard_id
    = 3, offset = 4, size = 5, crc32c = 6 (fixed32), slices = 7 (repeated
    `TensorSliceProto`)."""
    fields = _fields(buffer)
    shape = _fields(_last(fields, 2, b""))
    if _last(shape, 3, 0):
        raise _Malformed("its shape has unknown rank")
    dims = [_signed(_last(_fields(dim), 1, 0)) for dim in shape.get(2, [])]
    if any(dim < 0 for dim in dims):
        raise _Malformed(f"its shape {dims} has a negative size")
    return {
        "dtype": _last(fields, 1, 0),
        "shape": dims,
        "shard_id": _last(fields, 3, 0),
        "offset": _last(fields, 4, 0),
        "size": _last(fields, 5, 0),
        "crc32c": _last(fields, 6, 0),
        "slices": [_decode_slice(value) for value in fields.get(7, [])],
    }


def _decode_slice(buffer):
    """`TensorSliceProto`: extent = 1 (repeated; start = 1, length = 2, no
    length meaning the whole dimension) -> `[(start, length or None)]`."""
    extents = []
    for extent in _fields(buffer).get(1, []):
        fields = _fields(extent)
        length = _last(fields, 2, None)
        extents.append((_signed(_last(fields, 1, 0)), None if length is None else _signed(length)))
    return extents


def _fields(buffer):
    """A protobuf message's fields: number -> list of values (ints for
    varint and fixed fields, bytes for length-delimited ones)."""
    fields, position = {}, 0
    while position < len(buffer):
        tag, position = _varint(buffer, position)
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value, position = _varint(buffer, position)
        elif wire_type in (1, 5):
            width = 8 if wire_type == 1 else 4
            if position + width > len(buffer):
                raise _Malformed("a fixed-width field runs past the message")
            value = int.from_bytes(buffer[position: position + width], "little")
            position += width
        elif wire_type == 2:
            size, position = _varint(buffer, position)
            if position + size > len(buffer):
                raise _Malformed("a length-delimited field runs past the message")
            value = bytes(buffer[position: position + size])
            position += size
        else:
            raise _Malformed(f"field {number} has wire type {wire_type}, which no checkpoint message uses")
        if number == 0:
            raise _Malformed("a field numbered 0")
        fields.setdefault(number, []).append(value)
    return fields


def _last(fields, number, default):
    # Protobuf's rule: of a scalar field given several times, the last wins.
    values = fields.get(number)
    return values[-1] if values else default


def _signed(value):
    """An int64 field's varint (two's complement in 64 bits) as a Python int."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _varint(buffer, position):
    result, shift = 0, 0
    while True:
        if position >= len(buffer):
            raise _Malformed("a varint runs past the end")
        byte = buffer[position]
        position += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, position
        shift += 7
        if shift >= 70:
            raise _Malformed("a varint longer than 10 bytes")


class _Malformed(Exception):
    """A structure that does not decode; `_naming` says in which file."""


@contextlib.contextmanager
def _naming(path, what):
    """Turns `_Malformed` (and a key that is not UTF-8) into a
    `CheckpointError` naming `path` and `what`."""
    try:
        yield
    except (_Malformed, UnicodeDecodeError) as error:
        raise CheckpointError(
            f"TensorFlow checkpoint file {path!r} is truncated or damaged: "
            f"{what} does not decode ({error})."
        ) from error


# -- Slice keys (TensorFlow's OrderedCode) ----------------------------------


def encode_slice_key(name, extents):
    """The table key under which TensorFlow stores one slice of variable
    `name` (`checkpoint::EncodeTensorNameSlice`): in OrderedCode, the number
    0, the name, the rank, then each dimension's start and length (0 and -1
    for a whole dimension)."""
    # OrderedCode's strings escape 0x00 as 00 ff and 0xff as ff 00, and end in 00 01.
    escaped = bytearray()
    for byte in name.encode("utf-8"):
        escaped += {0: b"\x00\xff", 0xFF: b"\xff\x00"}.get(byte, bytes([byte]))
    key = bytearray(_unsigned_code(0) + escaped + b"\x00\x01" + _unsigned_code(len(extents)))
    for start, length in extents:
        key += _signed_code(start if length is not None else 0)
        key += _signed_code(length if length is not None else -1)
    return bytes(key)


def _unsigned_code(value):
    """OrderedCode's increasing unsigned number: its byte count, then its
    big-endian bytes without leading zeros."""
    size = (value.bit_length() + 7) // 8
    return bytes([size]) + value.to_bytes(size, "big")


# OrderedCode's signed numbers: the leading bits of the first one or two
# bytes give the length (1 to 10 bytes), the rest the two's complement value.
_SIGNED_HEADER_BITS = (
    (0, 0), (0x80, 0), (0xC0, 0), (0xE0, 0), (0xF0, 0), (0xF8, 0),
    (0xFC, 0), (0xFE, 0), (0xFF, 0), (0xFF, 0x80), (0xFF, 0xC0),
)


def _signed_code(value):
    magnitude = ~value if value < 0 else value
    length = 1
    while magnitude >= 1 << (7 * length - 1) and length < 10:
        length += 1
    code = bytearray((value & ((1 << (8 * length)) - 1)).to_bytes(length, "big"))
    first, second = _SIGNED_HEADER_BITS[length]
    code[0] ^= first
    if length > 1:
        code[1] ^= second
    return bytes(code)


# -- CRC32C (Castagnoli), as TensorFlow checks it ---------------------------

_POLYNOMIAL = 0x82F63B78  # CRC32C's polynomial, bit-reversed
_LANE = 64  # bytes of one lane: the data are split in lanes computed at once
_CHUNK = 1 << 22  # bytes processed together, few enough to stay in cache


def mask(crc):
    """TensorFlow's masked CRC (`crc32c::Mask`): rotated right by 15 bits
    plus a constant, so that a CRC stored inside checksummed data does not
    checksum to itself."""
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def crc32c(data, crc=0):
    """CRC32C of `data` (bytes-like or a numpy array's bytes), extending
    `crc`, the CRC32C of the bytes before it (TensorFlow's
    `crc32c::Extend`), computed over 64-byte lanes at once.

    Example: `crc32c(b"123456789") == 0xE3069283`.
    """
    data = np.frombuffer(data, np.uint8) if not isinstance(data, np.ndarray) else data.reshape(-1).view(np.uint8)
    state = crc ^ 0xFFFFFFFF
    for start in range(0, len(data), _CHUNK):
        chunk = data[start: start + _CHUNK]
        state = int(_advance(np.uint32(state), len(chunk))) ^ _chunk_register(chunk)
    return state ^ 0xFFFFFFFF


@functools.cache
def _tables():
    """The byte table of CRC32C and the two 16-bit tables that advance the
    register over a 32-bit word (its low and its high half)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(_POLYNOMIAL), table >> 1).astype(np.uint32)
    # by_position[k][b]: byte b followed by k zero bytes.
    by_position = [table]
    for _ in range(3):
        by_position.append((by_position[-1] >> 8) ^ table[by_position[-1] & 0xFF])
    half = np.arange(1 << 16, dtype=np.uint32)
    low = by_position[3][half & 0xFF] ^ by_position[2][half >> 8]
    high = by_position[1][half & 0xFF] ^ by_position[0][half >> 8]
    return table, [int(value) for value in table], low, high


def _chunk_register(chunk):
    """The CRC register after `chunk` from a zero register (no pre- or
    post-conditioning)."""
    _, byte_table, low, high = _tables()
    lanes = len(chunk) // _LANE
    register = 0
    if lanes:
        # One row per word position, one column per lane.
        words = np.ascontiguousarray(chunk[: lanes * _LANE].view("<u4").reshape(lanes, _LANE // 4).T)
        registers = np.zeros(lanes, np.uint32)
        low_half, high_part = np.empty(lanes, np.uint32), np.empty(lanes, np.uint32)
        for row in words:
            registers ^= row
            np.bitwise_and(registers, 0xFFFF, out=low_half)
            np.right_shift(registers, 16, out=registers)
            np.take(high, registers, out=high_part)
            np.take(low, low_half, out=registers)
            registers ^= high_part
        # Pairwise: the earlier lane's register advanced over the later
        # lane's bytes, then added; a zero register in front of an odd
        # count stands for zero bytes, which leave a zero register as it is.
        level = _LANE.bit_length() - 1
        while len(registers) > 1:
            if len(registers) % 2:
                registers = np.concatenate([np.zeros(1, np.uint32), registers])
            registers = _apply(_zero_bytes_operator(level), registers[0::2]) ^ registers[1::2]
            level += 1
        register = int(registers[0])
    for byte in chunk[lanes * _LANE:].tobytes():
        register = byte_table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


def _advance(registers, size):
    """`registers` advanced over `size` zero bytes."""
    level = 0
    while size:
        if size & 1:
            registers = _apply(_zero_bytes_operator(level), registers)
        size >>= 1
        level += 1
    return registers


def _apply(operator, registers):
    return (
        operator[0][registers & 0xFF] ^ operator[1][(registers >> 8) & 0xFF]
        ^ operator[2][(registers >> 16) & 0xFF] ^ operator[3][registers >> 24]
    )


@functools.cache
def _zero_bytes_operator(level):
    """Four byte tables of the linear map that advances a register over
    `2**level` zero bytes: the map of a register is the XOR of its bytes'
    entries."""
    bits = np.uint32(1) << np.arange(32, dtype=np.uint32)
    if level == 0:
        table = _tables()[0]
        images = table[bits & 0xFF] ^ (bits >> 8)
    else:
        half = _zero_bytes_operator(level - 1)
        images = _apply(half, _apply(half, bits))
    # operator[k][v]: XOR of the images of the bits set in v, for byte k.
    chosen = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)
    return np.stack([
        np.bitwise_xor.reduce(np.where(chosen, images[8 * k: 8 * k + 8], np.uint32(0)), axis=1)
        for k in range(4)
    ]).astype(np.uint32)
