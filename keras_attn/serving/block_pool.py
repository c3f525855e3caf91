"""The accounting of a paged key/value cache: which fixed-size blocks of
positions each request holds."""

import collections


class BlockPool:
    """`num_blocks` blocks of `block_size` positions each, lent to requests.

    Block 0 is never lent: it is the scratch block that padding and idle
    rows of a batch write to, so that every step writes the same number of
    entries. A request holds a list of block ids (its block table): its
    position `p` lives at entry `p % block_size` of block `table[p //
    block_size]`. Blocks are lent and returned by id, nothing is copied.

    With `prefix_sharing`, a full block of a prompt's tokens is lent to
    every request whose prompt starts with the same tokens up to that
    block's end while one of them holds it (a reference count per block):
    its keys and values are the same for all of them, since a position's
    keys depend only on the tokens up to it.

    Args:
        num_blocks: blocks in the pool, the scratch block included (>= 2).
        block_size: positions per block (>= 1).
        prefix_sharing: whether full prompt blocks are shared.
    """

    def __init__(self, num_blocks, block_size, prefix_sharing=True):
        if not isinstance(num_blocks, int) or num_blocks < 2:
            raise ValueError(
                f"`num_blocks` must be an integer >= 2 (one is the scratch block); "
                f"received num_blocks={num_blocks!r}."
            )
        if not isinstance(block_size, int) or block_size < 1:
            raise ValueError(f"`block_size` must be an integer >= 1; received {block_size!r}.")
        self.num_blocks = num_blocks
        self.block_size = block_size
        self.prefix_sharing = prefix_sharing
        self._free = collections.deque(range(1, num_blocks))
        self._references = [0] * num_blocks
        self._by_prefix = {}
        self._prefix_of = {}
        # Blocks lent already written (shared prompt starts), in all.
        self.shared_lent = 0

    @property
    def capacity(self):
        """Blocks a request can hold at most (all but the scratch block)."""
        return self.num_blocks - 1

    @property
    def free_blocks(self):
        return len(self._free)

    def blocks_for(self, length):
        """Blocks that `length` positions take."""
        return -(-length // self.block_size)

    def shared_prefix(self, prompt):
        """The blocks holding the longest run of `prompt`'s full blocks that
        a running request has written, stopping before the block of its last
        token (whose logits a request computes itself)."""
        if not self.prefix_sharing:
            return []
        blocks, key = [], ()
        for start in range(0, len(prompt) - 1 - self.block_size + 1, self.block_size):
            key = (key, tuple(prompt[start:start + self.block_size]))
            block = self._by_prefix.get(key)
            if block is None:
                break
            blocks.append(block)
        return blocks

    def allocate(self, prompt, length):
        """A block table for a request of `prompt` that will hold `length`
        positions, or None when the free blocks are too few now. Returns
        `(table, shared)`: its blocks, of which the first `shared` already
        hold the prompt's keys."""
        shared = self.shared_prefix(prompt)
        needed = self.blocks_for(length) - len(shared)
        if needed > len(self._free):
            return None
        table = list(shared) + [self._free.popleft() for _ in range(needed)]
        for block in table:
            self._references[block] += 1
        self.shared_lent += len(shared)
        return table, len(shared)

    def publish(self, prompt, table, written):
        """Offers the full blocks of `prompt` within its first `written`
        positions (the request has written their keys) for sharing."""
        if not self.prefix_sharing:
            return
        key = ()
        for index in range(min(written, len(prompt) - 1) // self.block_size):
            start = index * self.block_size
            key = (key, tuple(prompt[start:start + self.block_size]))
            block = table[index]
            if block not in self._prefix_of and key not in self._by_prefix:
                self._by_prefix[key] = block
                self._prefix_of[block] = key

    def grow(self, table, length):
        """Appends free blocks to `table` (in place) until it holds `length`
        positions; returns False, lending nothing, when too few are free."""
        needed = self.blocks_for(length) - len(table)
        if needed <= 0:
            return True
        if needed > len(self._free):
            return False
        for _ in range(needed):
            block = self._free.popleft()
            self._references[block] += 1
            table.append(block)
        return True

    def release(self, table):
        """Returns a request's blocks; a block is free again once no request
        holds it."""
        for block in table:
            if self._references[block] <= 0:
                raise RuntimeError(f"block {block} released more often than it was lent")
            self._references[block] -= 1
            if self._references[block] == 0:
                key = self._prefix_of.pop(block, None)
                if key is not None:
                    del self._by_prefix[key]
                self._free.append(block)

    def check(self):
        """Raises if the accounting is inconsistent: every block is either
        free or held, never both, and the scratch block never lent."""
        free = set(self._free)
        if len(free) != len(self._free) or 0 in free:
            raise AssertionError("the free list repeats a block or holds the scratch block")
        for block in range(1, self.num_blocks):
            if (block in free) == (self._references[block] > 0):
                raise AssertionError(f"block {block}: free={block in free}, "
                                     f"references={self._references[block]}")
