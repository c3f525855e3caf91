"""`Source`: where a name table finds one variable in a checkpoint."""


class Source:
    """Where a variable is stored: accepted checkpoint names (tried in order,
    `{layer}` standing for the block index, `{layer:03d}` zero-padded),
    whether the stored array is the transpose of the Keras one, and `part`
    when the variable is a slice of the stored array's last axis:
    `(index, count)`, the `index`-th of `count` equal slices (GPT-2's
    queries, keys and values, stored side by side in `c_attn`; Phi-3's
    `gate_up_proj`, gate then up), or `(index, parts)`, `parts` the table
    names of the variables stored side by side, in order, whose widths the
    model's variables give (Phi-3's `qkv_proj`, whose keys and values are
    narrower than its queries under grouped-query attention).
    `port_weights` gives those widths to `shape` and `value`."""

    def __init__(self, *names, transpose=False, part=None):
        self.names = names
        self.transpose = transpose
        self.part = part

    def __repr__(self):
        options = (("transpose",) if self.transpose else ()) + (
            (f"part={self.part}",) if self.part else ()
        )
        return f"Source{self.names + options}"

    @property
    def parts(self):
        """The table names of a split of unequal widths, else None."""
        if self.part is not None and isinstance(self.part[1], tuple):
            return self.part[1]
        return None

    def shape(self, stored, widths=None):
        """The variable's shape for a stored array of shape `stored`
        (`widths`: those of `parts`, for a split of unequal widths)."""
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
        return array

    def _columns(self, total, widths):
        index, count = self.part
        if self.parts is None:
            width = total // count
            return index * width, (index + 1) * width
        if widths is None or len(widths) != len(self.parts):
            raise ValueError(f"{self!r}: the widths of {list(self.parts)} are needed.")
        if sum(widths) != total:
            # A width the model does not have: `port_weights` reports the shape.
            return 0, total
        start = sum(widths[:index])
        return start, start + widths[index]


def torch_linear(layer, stored, part=None):
    """The name-table entries of a Keras `Dense` named `layer` stored as the
    `torch.nn.Linear` `stored`: its kernel, `(out, in)` hence transposed, and
    its bias (read where the model has one), or their `part` of a fused
    projection: `(index, count)`, or `(index, layers)`, the Keras `Dense`s
    stored side by side (see `Source`)."""
    def of(weight):
        if part is None or isinstance(part[1], int):
            return part
        return (part[0], tuple(f"{name}/{weight}" for name in part[1]))

    return {
        f"{layer}/kernel": Source(f"{stored}.weight", transpose=True, part=of("kernel")),
        f"{layer}/bias": Source(f"{stored}.bias", part=of("bias")),
    }


def torch_layer_norm(layer, stored):
    """The name-table entries of a Keras `LayerNormalization` named `layer`
    stored as the `torch.nn.LayerNorm` `stored`: its scale and bias."""
    return {
        f"{layer}/gamma": Source(f"{stored}.weight"),
        f"{layer}/beta": Source(f"{stored}.bias"),
    }
