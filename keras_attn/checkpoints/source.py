"""`Source`: where a name table finds one variable in a checkpoint, and the
entries of the layers every format stores alike."""

from keras_attn import layer_names


class Source:
    """Where a variable is stored and how its value is read from there.

    Args:
        *names: the accepted checkpoint names, tried in order (`{layer}`
            stands for the block index, `{layer:03d}` zero-padded).
        transpose: whether the stored array is the transpose of the Keras
            one (a `torch.nn.Linear`'s `(out, in)` kernel).
        part: for a variable stored side by side with others along the
            stored array's last axis, `(index, widths)`: the `index`-th of
            the slices. `widths` is a count of equal slices (GPT-2's `c_attn`
            holds queries, keys and values), a tuple of the slices' widths,
            or a tuple of the table paths of the variables stored side by
            side, whose widths the model's variables give (Phi-3's
            `qkv_proj` under grouped-query attention).
        transform: a function applied last to the array read (after the
            transpose and the split), keeping its shape: what a format
            stores otherwise than the Keras variable holds it, such as
            `lambda w: 1.0 + w` for a norm stored with its offset.

    `port_weights` gives the widths of the variables named in `part` to
    `shape` and `value`.
    """

    def __init__(self, *names, transpose=False, part=None, transform=None):
        self.names = names
        self.transpose = transpose
        self.part = part
        self.transform = transform

    def __repr__(self):
        options = (("transpose",) if self.transpose else ()) + (
            (f"part={self.part}",) if self.part else ()
        ) + ((f"transform={self.transform!r}",) if self.transform else ())
        return f"Source{self.names + options}"

    @property
    def parts(self):
        """The table paths of a split whose widths the model gives, else None."""
        if self.part is not None and _names_variables(self.part[1]):
            return self.part[1]
        return None

    def shape(self, stored, widths=None):
        """The variable's shape for a stored array of shape `stored`
        (`widths`: those of `parts`, where the model gives them)."""
        shape = tuple(stored)[::-1] if self.transpose else tuple(stored)
        if self.part is not None and shape:
            start, stop = self._columns(shape[-1], widths)
            shape = shape[:-1] + (stop - start,)
        return shape

    def value(self, array, widths=None):
        """The variable's value from the stored `array`."""
        array = array.T if self.transpose else array
        if self.part is not None:
            start, stop = self._columns(array.shape[-1], widths)
            array = array[..., start:stop]
        return array if self.transform is None else self.transform(array)

    def _columns(self, total, widths):
        index, split = self.part
        if isinstance(split, int):
            width = total // split
            return index * width, (index + 1) * width
        if self.parts is None:
            widths = split
        elif widths is None or len(widths) != len(self.parts):
            raise ValueError(f"{self!r}: the widths of {list(self.parts)} are needed.")
        if sum(widths) != total:
            # Widths the stored array does not have: `port_weights` reports the shape.
            return 0, total
        start = sum(widths[:index])
        return start, start + widths[index]


def _names_variables(split):
    return isinstance(split, tuple) and all(isinstance(entry, str) for entry in split)


def dense(layer, kernel, bias, transpose=False, part=None):
    """The entries of a Keras `Dense` named `layer` whose kernel and bias are
    stored as `kernel` and `bias` (the bias read where the model has one),
    or their `part` of a fused projection (see `Source`; variables named in
    it are Keras `Dense` layers, the kernel's and bias's part taken from
    theirs)."""

    def of(weight):
        if part is None or not _names_variables(part[1]):
            return part
        return (part[0], tuple(f"{name}/{weight}" for name in part[1]))

    return {
        f"{layer}/kernel": Source(kernel, transpose=transpose, part=of("kernel")),
        f"{layer}/bias": Source(bias, part=of("bias")),
    }


def merged(entries):
    """One dict of the entries of every dict in `entries`."""
    return {path: source for group in entries for path, source in group.items()}


def fused(layers, stored, layer_entries, widths=None, widths_from_model=False):
    """The entries of the Keras `Dense`s `layers` stored side by side, in
    order, along the output axis of one projection `stored` (GPT-2's
    `c_attn`, ModernBERT's `Wqkv`): `layer_entries(layer, stored, part)`
    gives one layer's (`torch_linear`, say). The slices are equal, as wide
    as `widths` (a tuple of ints), or with `widths_from_model` as wide as
    the model's `layers` (Phi-3's `qkv_proj` under grouped-query
    attention)."""
    layers = tuple(layers)
    split = layers if widths_from_model else tuple(widths) if widths else len(layers)
    return merged(
        layer_entries(layer, stored, part=(index, split)) for index, layer in enumerate(layers)
    )


def torch_linear(layer, stored, part=None):
    """The entries of a Keras `Dense` named `layer` stored as the
    `torch.nn.Linear` `stored`: its `(out, in)` weight, hence transposed,
    and its bias."""
    return dense(layer, f"{stored}.weight", f"{stored}.bias", transpose=True, part=part)


def tensorflow_dense(layer, stored):
    """The entries of a Keras `Dense` named `layer` stored as the TensorFlow
    dense layer `stored` (`stored/kernel`, `(in, out)` as in Keras, and
    `stored/bias`)."""
    return dense(layer, f"{stored}/kernel", f"{stored}/bias")


def layer_norm(layer, gamma, beta):
    """The entries of a Keras `LayerNormalization` named `layer` whose scale
    and bias are stored as `gamma` and `beta`."""
    return {f"{layer}/gamma": Source(gamma), f"{layer}/beta": Source(beta)}


def torch_layer_norm(layer, stored):
    """The entries of a Keras `LayerNormalization` named `layer` stored as
    the `torch.nn.LayerNorm` `stored`."""
    return layer_norm(layer, f"{stored}.weight", f"{stored}.bias")


def tensorflow_layer_norm(layer, stored):
    """The entries of a Keras `LayerNormalization` named `layer` stored as
    TensorFlow's `stored/gamma` and `stored/beta`."""
    return layer_norm(layer, f"{stored}/gamma", f"{stored}/beta")


def rms_norm(layer, stored):
    """The entry of an `RMSNormalization` named `layer` whose scale is
    stored as `stored`."""
    return {f"{layer}/scale": Source(stored)}


# The layers of a BERT-layout block by role: `Dense`s, then norms.
BLOCK_DENSES = ("query", "key", "value", "attention_output", "intermediate", "output")
BLOCK_NORMS = ("attention_norm", "feed_forward_norm")


def block_layers(index):
    """The Keras names of block `index`'s layers (the shared block's for
    None), by role."""
    attention, feed_forward = layer_names.attention(index), layer_names.feed_forward(index)
    return {
        "query": f"{attention}/query_dense",
        "key": f"{attention}/key_dense",
        "value": f"{attention}/value_dense",
        "attention_output": f"{attention}/output_dense",
        "attention_norm": layer_names.norm(attention),
        "intermediate": f"{feed_forward}/intermediate_dense",
        "output": f"{feed_forward}/output_dense",
        "feed_forward_norm": layer_names.norm(feed_forward),
    }


def bert_block(index, *layouts, torch=False):
    """The entries of a BERT-layout block `index` (`"{layer}"`; None: a
    shared block), stored where `layouts` say, tried in order: each a dict
    of role (see `block_layers`) -> the stored layer's name. The names are
    torch's (`.weight`, `.bias`, `(out, in)` kernels) with `torch`, else
    TensorFlow's (`/kernel`, `/bias`, `/gamma`, `/beta`)."""
    dot, (kernel, bias, gamma, beta) = (
        (".", ("weight", "bias", "weight", "bias")) if torch else
        ("/", ("kernel", "bias", "gamma", "beta"))
    )
    entries = {}
    for role, layer in block_layers(index).items():
        stored = [layout[role] for layout in layouts]
        if role in BLOCK_NORMS:
            entries[f"{layer}/gamma"] = Source(*(f"{name}{dot}{gamma}" for name in stored))
            entries[f"{layer}/beta"] = Source(*(f"{name}{dot}{beta}" for name in stored))
        else:
            entries[f"{layer}/kernel"] = Source(
                *(f"{name}{dot}{kernel}" for name in stored), transpose=torch
            )
            entries[f"{layer}/bias"] = Source(*(f"{name}{dot}{bias}" for name in stored))
    return entries


def under_scope(scope, layout, separator):
    """`layout` (role -> stored layer name) with every name under `scope`."""
    return {role: f"{scope}{separator}{name}" for role, name in layout.items()}
