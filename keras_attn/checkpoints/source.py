"""`Source`: where a name table finds one variable in a checkpoint."""


class Source:
    """Where a variable is stored: accepted checkpoint names (tried in order,
    `{layer}` standing for the block index, `{layer:03d}` zero-padded),
    whether the stored array is the transpose of the Keras one, and `part`,
    `(index, count)`, when the variable is one of `count` equal slices of
    the stored array's last axis (GPT-2's queries, keys and values, stored
    side by side in `c_attn`)."""

    def __init__(self, *names, transpose=False, part=None):
        self.names = names
        self.transpose = transpose
        self.part = part

    def __repr__(self):
        options = (("transpose",) if self.transpose else ()) + (
            (f"part={self.part}",) if self.part else ()
        )
        return f"Source{self.names + options}"

    def shape(self, stored):
        """The variable's shape for a stored array of shape `stored`."""
        shape = tuple(stored)[::-1] if self.transpose else tuple(stored)
        if self.part is not None and shape:
            shape = shape[:-1] + (shape[-1] // self.part[1],)
        return shape

    def value(self, array):
        """The variable's value from the stored `array`."""
        array = array.T if self.transpose else array
        if self.part is not None:
            index, count = self.part
            width = array.shape[-1] // count
            array = array[..., index * width : (index + 1) * width]
        return array


def torch_linear(layer, stored, part=None):
    """The name-table entries of a Keras `Dense` named `layer` stored as the
    `torch.nn.Linear` `stored`: its kernel, `(out, in)` hence transposed, and
    its bias (read where the model has one), or their `part` `(index,
    count)` of a fused projection."""
    return {
        f"{layer}/kernel": Source(f"{stored}.weight", transpose=True, part=part),
        f"{layer}/bias": Source(f"{stored}.bias", part=part),
    }
