"""The argument checks the preprocessing helpers share."""


def check_count(caller, argument, value):
    """Raises a ValueError naming `caller` and `argument` unless `value` is an
    int >= 1 (a size, a length, a number of dimensions)."""
    if not isinstance(value, int) or value < 1:
        raise ValueError(f"{caller}: `{argument}` must be an int >= 1; received {value!r}.")
