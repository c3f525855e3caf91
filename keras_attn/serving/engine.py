"""Continuous batching over a paged key/value cache."""

import collections
import dataclasses
import itertools
import threading
import time
from typing import List
from typing import Optional

import keras
import numpy as np

from keras_attn import progress
from keras_attn.generation.cached_forward import CachedForward
from keras_attn.layers.packed import PackedRows
from keras_attn.layers.rope_scaling import CLIPPED_TYPES
from keras_attn.serving.block_pool import BlockPool
from keras_attn.serving.programs import StepPrograms
from keras_attn.serving.request import Request
from keras_attn.serving.sampling import SamplingParams
from keras_attn.serving.sampling import choose_token
from keras_attn.serving.sampling import token_logprob
from keras_attn.serving.streaming import TextStream
from keras_attn.torch_runtime.compiled_step import torch_compile_mode
from keras_attn.torch_runtime.openmp import release_thread_pool

# The shared clock is rebased below this (float32 holds its integers
# exactly, for XPOS's decay).
CLOCK_LIMIT = 2**22

# The most prompts one packed step encodes: the first waiting one's next
# chunk, and after it whole prompts that fit in the rest of the chunk. The
# head runs on one token of each, padding included, at every packed step.
PACKED_PROMPTS = 4


class Engine:
    """Generates for many requests at once: a request joins the running batch
    at a step boundary and leaves it when it ends, its row and blocks reused
    at once (continuous batching).

    Each step admits waiting requests whose blocks fit and for which a row
    will be free once their prompts are encoded, encodes one chunk of
    at most `prefill_chunk` tokens of one admitted prompt (chunked prefill),
    and runs one decoding step for every decoding row. Where the model
    allows (`packs`), the chunk and the rows' tokens are one pass, packed in
    one row of `max_batch + prefill_chunk` tokens, so that a step reads the
    weights once, and whole prompts that fit in the rest of the chunk (up
    to `PACKED_PROMPTS` prompts in all) are encoded in the same pass. The
    programs have fixed shapes (`(max_batch, 1)`, `(1, prefill_chunk)` and
    the packed row), so nothing compiles per request.
    Keys and values live in a paged cache (`BlockPool`): a request is lent
    blocks as it grows (its prompt's at admission; one that cannot fit
    waits), and when none are free the latest admitted request is preempted
    (its blocks freed; when admitted again its prompt and generated tokens
    are encoded again: an encoder-decoder's decoder tokens, its encoded
    source kept; a UniLM request's source and generated tokens in one
    pass). A request longer than `max_length` is refused. Each row reads
    its own positions, so a request computes what it computes alone (to
    float rounding).

    Serves `application="lm"` models with absolute, rotary or relative-bias
    positions, grouped-query attention and attention windows, and
    `application="unilm"` models: a prompt is the source (segment 0, seen
    bidirectionally, so it is encoded in one chunk of a multiple of
    `prefill_chunk` tokens and its blocks are not shared), generated tokens
    are segment 1, each seeing the source and the tokens before it; and
    encoder-decoders (`"seq2seq"`, T5): a prompt is the source (at most
    `max_length` tokens), encoded once when its request starts, and the
    decoder starts from its start token. Sink tokens beside a window
    (`attention_sink_tokens`) are each row's first positions, which its
    blocks keep. A rope scaling that reads the length (`dynamic`,
    LongRoPE) reads each row's own; a LongRoPE row encodes its sequence
    again once it passes the original length, as `generate` does (no prefix
    sharing there). Refuses, naming the reason, conditional layer norms,
    ReRoPE, and length-reading scalings in attention that does not compute
    in float32.

    Args:
        model: a `TransformerModel` built with `application="lm"`,
            `"unilm"` or `"seq2seq"`.
        max_batch: rows decoded together.
        max_length: the longest request (prompt plus new tokens); default
            the model's `max_position_embeddings`.
        block_size: positions per cache block.
        num_blocks: blocks per layer; default enough for `max_batch`
            requests of `max_length` (plus the scratch block).
        prefill_chunk: prompt tokens encoded per step; default
            `default_prefill_chunk(max_batch)`, 4 per row and at least 32.
        tokenizer: optional, with `decode(ids)`: gives requests their text,
            and is needed for `stop` strings.
        end_token_ids: the end tokens of requests that give none; default
            the tokenizer's `end_id`, else none (`keras-attn serve` reads the
            folder's `eos_token_id`).
        prefix_sharing: requests whose prompts start with the same full
            blocks share those blocks (never for UniLM, whose source tokens
            see later ones, or encoder-decoders, whose keys see the source).
        seed: seeds the generator of requests without a seed.

    Example:

    ```python
    engine = keras_attn.serving.Engine(model, max_batch=4)
    request = engine.submit([5, 7, 9], SamplingParams(max_new_tokens=8))
    for delta in request:
        print(delta.tokens)
    ```
    """

    def __init__(self, model, max_batch=8, max_length=None, block_size=16, num_blocks=None,
                 prefill_chunk=None, tokenizer=None, end_token_ids=None, prefix_sharing=True,
                 seed=None):
        self.forward = forward = CachedForward(model)
        refusal = unsupported(forward)
        if refusal:
            raise ValueError(f"keras_attn.serving.Engine cannot serve {model.name}: {refusal}")
        for name, value, low in (("max_batch", max_batch, 1), ("block_size", block_size, 1),
                                 ("prefill_chunk", prefill_chunk, 1)):
            if value is None and name == "prefill_chunk":
                continue
            if not isinstance(value, int) or isinstance(value, bool) or value < low:
                raise ValueError(f"`{name}` must be an integer >= {low}; received {value!r}.")
        if prefill_chunk is None:
            prefill_chunk = default_prefill_chunk(max_batch)
        self.model = model
        self.max_batch = max_batch
        self.max_length = _longest_request(forward, max_length)
        self.block_size = block_size
        self.prefill_chunk = prefill_chunk
        self.tokenizer = tokenizer
        # The window of positions a decoding row attends to, and the prompt
        # chunk's (room for a chunk past the longest prompt).
        self.capacity = -(-self.max_length // block_size) * block_size
        self.prefill_capacity = self.capacity + prefill_chunk
        if num_blocks is None:
            num_blocks = max_batch * (self.capacity // block_size) + 1
        self.unilm, self.seq2seq = forward.unilm, forward.seq2seq
        # A UniLM source's keys see later tokens, an encoder-decoder's the
        # source: neither is a prefix's alone. A LongRoPE row encodes its
        # blocks again, long, once it passes the original length.
        self.recompute_length = forward.recompute_length
        # Whether a prompt chunk and the decoding rows run as one packed pass.
        self.packs = forward.packs_sequences
        self.packed_steps = 0
        self.pool = BlockPool(
            num_blocks, block_size,
            prefix_sharing and not (self.unilm or self.seq2seq or self.recompute_length),
        )
        if end_token_ids is None:
            end = getattr(tokenizer, "end_id", None) if tokenizer is not None else None
            end_token_ids = () if end is None else end
        self.end_token_ids = SamplingParams(end_token_ids=end_token_ids).end_token_ids
        self._rng = np.random.default_rng(seed)
        # An encoder-decoder's sources, one row per decoding row (see
        # `_fill_rows`), of at most `max_length` tokens.
        self.source_length = -(-self.max_length // prefill_chunk) * prefill_chunk
        # The pools and programs. On torch, how programs compile
        # (`KERAS_ATTN_TORCH_COMPILE`, read once here); `warm_up` compiles
        # at once where this is "auto".
        self.programs = StepPrograms(
            forward, model, max_batch, num_blocks * block_size, self.source_length,
            torch_compile_mode() or "never",
        )
        self._lock = threading.RLock()
        self._ids = itertools.count()
        self._admissions = itertools.count()
        self.preemptions = 0
        self._waiting = collections.deque()
        self._prefilling = collections.deque()
        self._ready = collections.deque()  # prefilled, waiting for a row
        self._rows: List[Optional[Request]] = [None] * max_batch
        self._clock = self.capacity
        self._thread = None
        self._stopping = False
        self._work = threading.Event()

    # Requests ------------------------------------------------------------

    def submit(self, prompt, params=None, **kwargs):
        """Queues a request and returns its `Request`.

        Args:
            prompt: token ids (a non-empty sequence of ints below the
                vocabulary size), or a string when the engine has a tokenizer.
            params: its `SamplingParams`; or give their fields as keywords.

        Raises:
            ValueError: a bad prompt or parameter, a request longer than
                `max_length`, or one needing more blocks than the pool has.
        """
        if params is None:
            params = SamplingParams(**kwargs)
        elif kwargs:
            raise ValueError("give `params` or its fields as keywords, not both")
        if params.stop and self.tokenizer is None:
            raise ValueError("`stop` strings need an engine with a `tokenizer`.")
        if isinstance(prompt, str):
            if self.tokenizer is None:
                raise ValueError("a text prompt needs an engine with a `tokenizer`.")
            prompt = self.tokenizer.encode(prompt)[0]
        prompt = [int(t) for t in np.asarray(prompt).reshape(-1)] if len(prompt) else []
        vocab = self.forward.vocab_size
        if not prompt:
            raise ValueError("the prompt is empty; give at least one token.")
        bad = [t for t in prompt if not 0 <= t < vocab]
        if bad:
            raise ValueError(f"prompt token {bad[0]} is outside the vocabulary [0, {vocab}).")
        source = None
        if self.seq2seq:
            # The prompt is the source; the decoder starts from its start token.
            if len(prompt) > self.max_length:
                raise ValueError(
                    f"the source's {len(prompt)} tokens are above the engine's "
                    f"max_length={self.max_length}."
                )
            source, prompt = prompt, [self.forward.start_token_id]
        length = len(prompt) + params.max_new_tokens
        if length > self.max_length:
            raise ValueError(
                f"the prompt's {len(prompt)} tokens plus max_new_tokens="
                f"{params.max_new_tokens} make {length} positions, above the engine's "
                f"max_length={self.max_length}."
            )
        if self.pool.blocks_for(length) > self.pool.capacity:
            raise ValueError(
                f"the request needs {self.pool.blocks_for(length)} blocks of "
                f"{self.block_size} positions; the pool has {self.pool.capacity}."
            )
        if params.end_token_ids is None:
            params = dataclasses.replace(params, end_token_ids=self.end_token_ids)
        stream = TextStream(self.tokenizer, prompt) if self.tokenizer is not None else None
        with self._lock:
            if self._stopping:
                raise RuntimeError("the engine is shutting down and takes no new requests")
            request = Request(self, next(self._ids), prompt, params, stream)
            request.source = source
            # A pad id is padding, as in the full pass (unless the model reads
            # a padding mask): its key is hidden from every later token.
            request.real = np.ones(self.max_length, bool)
            if self.forward.masks_pad_tokens:
                request.real[:len(prompt)] = np.asarray(prompt) != self.forward.pad_token_id
            self._waiting.append(request)
            self._work.set()
        return request

    def generate(self, prompts, params=None, **kwargs):
        """Submits every prompt and returns their generated tokens, in order."""
        requests = [self.submit(prompt, params, **kwargs) for prompt in prompts]
        return [request.result() for request in requests]

    def _cancel(self, request):
        with self._lock:
            if request.finished:
                return
            if request in self._waiting:
                self._waiting.remove(request)
            self._finish(request, "cancelled")
            self._work.set()

    # The loop -----------------------------------------------------------

    @property
    def running(self):
        """Whether a thread runs the engine (`start`)."""
        return self._thread is not None

    @property
    def busy(self):
        """Whether any request waits or runs."""
        return bool(self._waiting or self._prefilling or self._ready or any(self._rows))

    def stats(self):
        """Counts of waiting, prefilling and decoding requests, free blocks,
        and preemptions and packed steps so far."""
        with self._lock:
            return dict(
                waiting=len(self._waiting), prefilling=len(self._prefilling) + len(self._ready),
                decoding=sum(r is not None for r in self._rows),
                free_blocks=self.pool.free_blocks, blocks=self.pool.capacity,
                preemptions=self.preemptions, packed_steps=self.packed_steps,
            )

    def step(self):
        """One step: admit waiting requests, encode one prompt chunk, give
        prefilled requests free rows, decode every row (the chunk and the
        rows in one packed pass where the engine `packs`)."""
        with self._lock:
            self._admit()
            # Rows freed between steps (a cancelled request) are taken first.
            self._fill_rows()
            if self.packs and self._prefilling and (any(self._rows) or self._packed_prompts()):
                self._prefill_and_decode(self._prefilling[0])
            else:
                if self._prefilling:
                    self._prefill(self._prefilling[0])
                self._fill_rows()
                self._encode_again()
                if any(self._rows):
                    self._decode()
            self._fill_rows()

    def warm_up(self):
        """Builds every program the engine may run, before any request
        waits for one: the decoding step at each window size, the prompt
        chunk (a UniLM source at each width up to `max_length`) and an
        encoder-decoder's source encoding. On JAX and TensorFlow each is
        compiled by XLA; on torch each is compiled by `torch.compile` unless
        `KERAS_ATTN_TORCH_COMPILE=0` (where the switch's `auto` rule would
        compile a program later, during serving). Each runs once on the
        scratch block (no request's blocks are read or written; twice on
        the CPU under torch, where the second call compiles the first's
        recorded operations); progress is shown. Call it before `start`."""
        with self._lock:
            if self.busy:
                raise RuntimeError("warm_up() runs before any request is submitted.")
            windows = sorted({self._window_of(size) for size in
                              range(self.block_size, self.capacity + 1, self.block_size)})
            widths = [self.prefill_chunk]
            if self.unilm:
                # A source of at most `max_length - 1` tokens, in whole chunks.
                chunk = self.prefill_chunk
                widths = list(range(chunk, self.max_length - 1 + chunk, chunk))
            total = len(windows) * (1 + int(self.packs)) + len(widths) + int(self.seq2seq)
            # A request whose every block is the scratch block.
            phantom = Request(self, -1, [self.forward.pad_token_id], SamplingParams(), None)
            phantom.real = np.zeros(self.max_length, bool)
            phantom.table = [0] * (self.prefill_capacity // self.block_size + 1)
            source = None
            done = 0
            started = time.perf_counter()
            self.programs.warming = True
            try:
                if self.seq2seq:
                    done += 1
                    progress.say(f"warming up program {done} of {total}: the source encoding")
                    source = self._encode([self.forward.pad_token_id])
                for width in widths:
                    done += 1
                    progress.say(f"warming up program {done} of {total}: a prompt chunk of "
                                 f"{width} tokens")
                    arguments, _ = self._prefill_arguments(phantom, 0, width)
                    self.programs.run(arguments, self.prefill_capacity, source)
                for window in windows:
                    done += 1
                    progress.say(f"warming up program {done} of {total}: decoding over "
                                 f"{window} positions")
                    rows = [None] * self.max_batch
                    self.programs.run(self._decode_arguments(rows, self._clock, window),
                                      window, self.programs.sources)
                    if self.packs:
                        done += 1
                        progress.say(f"warming up program {done} of {total}: a prompt chunk "
                                     f"packed with decoding over {window} positions")
                        self.programs.run(*self._packed_arguments(
                            self._decode_arguments(rows, self._clock, window),
                            self._prefill_arguments(phantom, 0, self.prefill_chunk)[0],
                        ))
            finally:
                self.programs.warming = False
            progress.say(f"warmed up {progress.plural(total, 'program')} in "
                         f"{progress.duration(time.perf_counter() - started)}")

    def run(self):
        """Steps until no request waits or runs."""
        while self.busy:
            self.step()

    def start(self):
        """Runs the engine in a thread until `stop`. On torch, the calling
        thread's OpenMP workers are handed back first (`release_thread_pool`):
        left idle beside the engine's own, they slow each of its steps."""
        if self._thread is not None:
            return
        if keras.config.backend() == "torch":
            release_thread_pool()
        self._stopping = False
        self._thread = threading.Thread(target=self._serve, name="keras_attn-engine", daemon=True)
        self._thread.start()

    def stop(self, cancel=False):
        """Stops the thread: after every request finished, or at once with
        `cancel=True` (every unfinished request is cancelled)."""
        with self._lock:
            self._stopping = True
            if cancel:
                for request in self._unfinished():
                    self._cancel(request)
            self._work.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _unfinished(self):
        return (list(self._waiting) + list(self._prefilling) + list(self._ready)
                + [r for r in self._rows if r is not None])

    def _serve(self):
        while True:
            if self.busy:
                self.step()
                # Let a thread waiting for the lock (submit, cancel, stats)
                # take it: re-taking it at once can starve that thread for
                # many steps.
                time.sleep(0)
                continue
            if self._stopping:
                return
            self._work.wait(0.05)
            self._work.clear()

    # Steps ----------------------------------------------------------------

    def _admit(self):
        """Lends blocks to waiting requests, first come first served (the
        first that cannot fit makes those behind it wait too): for the
        tokens to encode and the first new one (more as it grows, `_lend`).
        A request is admitted only when a row will be free for it once its
        prompt is encoded (`_rows_due`): one encoded earlier would give its
        first token and then wait, its stream stalled, for a row."""
        while self._waiting:
            request = self._waiting[0]
            steps = sum(map(self._chunks, self._prefilling)) + self._chunks(request)
            if len(self._prefilling) + len(self._ready) >= self._rows_due(steps):
                return
            length = min(len(request.prompt) + request.params.max_new_tokens,
                         len(request.encoding) + 1)
            granted = self.pool.allocate(request.prompt, length)
            if granted is None:
                return
            self._waiting.popleft()
            request.table, shared = granted
            request.written = shared * self.block_size
            request.admitted = next(self._admissions)
            self._prefilling.append(request)

    def _chunks(self, request):
        """The prompt chunks (steps) left to encode `request`."""
        if self.unilm:
            return 1
        return -(-(len(request.encoding) - request.written) // self.prefill_chunk)

    def _rows_due(self, steps):
        """Rows free now or within `steps` steps: those whose requests reach
        their `max_new_tokens` by then (an end token or a stop string can
        free one sooner)."""
        return sum(request is None
                   or request.params.max_new_tokens - len(request.tokens) <= steps
                   for request in self._rows)

    def _lend(self, request, length):
        """Grows `request`'s blocks to hold `length` positions, preempting
        the latest admitted requests while too few are free. Returns False
        when `request` itself was preempted (it was the latest)."""
        while not self.pool.grow(request.table, length):
            holders = [r for r in self._unfinished() if r.table is not None]
            victim = max(holders, key=lambda r: r.admitted)
            self._preempt(victim)
            if victim is request:
                return False
        return True

    def _preempt(self, request):
        """Frees `request`'s blocks and puts it first in line: when admitted
        again, its prompt and the tokens it generated are encoded as a
        prompt (the last one's logits give its next token), as recomputing
        them alone would."""
        self.pool.release(request.table)
        request.table = request.admitted = None
        if request.row is not None:
            self._rows[request.row] = request.row = None
        for line in (self._prefilling, self._ready):
            if request in line:
                line.remove(request)
        self._encode_from_start(request)
        self._waiting.appendleft(request)
        self.preemptions += 1

    def _encode_from_start(self, request):
        """Makes `request`'s prompt and generated tokens the tokens its next
        prefill encodes, from position 0. A generated pad id is padding
        there too (the decoding step that would have marked it has not run
        for the last one)."""
        request.encoding = request.prompt + request.tokens
        request.written = 0
        if self.forward.masks_pad_tokens:
            length = len(request.encoding)
            request.real[:length] = np.asarray(request.encoding) != self.forward.pad_token_id

    def _prefill(self, request):
        """Encodes the next chunk of `request`'s prompt (a UniLM source
        whole, in the fewest chunks of `prefill_chunk` that hold it); after
        the last, its first token is chosen and it waits for a decoding
        row."""
        start = request.written
        if self.seq2seq and request.encoded_source is None:
            request.encoded_source = self._encode(request.source)
        size = self.prefill_chunk
        if self.unilm:
            # The source (and, preempted, the tokens generated) in one pass.
            size *= -(-len(request.encoding) // size)
        if not self._lend(request, min(start + size, len(request.encoding))):
            return
        arguments, n = self._prefill_arguments(request, start, size)
        logits = self.programs.run(arguments, self.prefill_capacity, request.encoded_source)
        self._prefilled(request, start + n, logits[0])

    def _prefilled(self, request, written, logits):
        """After a prompt chunk of `request` up to `written`: its blocks
        published; after the last, its first token chosen from `logits`
        and it waits for a decoding row."""
        request.written = written
        self.pool.publish(request.prompt, request.table, request.written)
        if request.written < len(request.encoding):
            return
        self._prefilling.remove(request)
        token = self._choose(request, logits)
        if not self._after_token(request, token):
            request.next_token = token
            self._ready.append(request)

    def _prefill_and_decode(self, request):
        """The next chunk of `request`'s prompt, the whole prompts that fit
        after it (`_packed_prompts`) and a decoding step of every row as one
        packed pass (`packs`); the chunk or the rows alone when lending
        blocks preempted the other."""
        start = request.written
        size = self.prefill_chunk
        if not self._lend(request, min(start + size, len(request.encoding))):
            self._decode()
            return
        self._lend_rows()
        if request.table is None:  # a row's block preempted the prompt
            self._decode()
            return
        others = self._packed_prompts()
        if not any(self._rows) and not others:
            # No row decodes (preempted for the prompt's blocks), and no
            # other prompt fits: the prompt program alone.
            self._prefill(request)
            return
        prefill, n = self._prefill_arguments(request, start, size)
        rows = self._rows
        running = [r for r in rows if r is not None]
        window = self._window(running) if running else self.block_size
        logits = self.programs.run(*self._packed_arguments(
            self._decode_arguments(rows, self._clock, window), prefill,
            [self._prefill_arguments(other, 0, len(other.encoding))[0] for other in others],
        ))
        self.packed_steps += 1
        self._decoded(rows, logits[:self.max_batch])
        self._prefilled(request, start + n, logits[self.max_batch])
        for index, other in enumerate(others, 1):
            self._prefilled(other, len(other.encoding), logits[self.max_batch + index])

    def _packed_prompts(self):
        """The waiting prompts after the first that a packed step encodes
        whole in the rest of its chunk, after the first's next chunk, at
        most `PACKED_PROMPTS` prompts in all: those with nothing written yet
        (a prompt that shares prefix blocks reads slots that only the first
        prompt's part of the pass has)."""
        if not self.packs:
            return []
        first = self._prefilling[0]
        used = min(self.prefill_chunk, len(first.encoding) - first.written)
        chosen = []
        for request in itertools.islice(self._prefilling, 1, PACKED_PROMPTS):
            if request.written or used + len(request.encoding) > self.prefill_chunk:
                break
            chosen.append(request)
            used += len(request.encoding)
        return chosen

    def _prefill_arguments(self, request, start, size):
        """The prompt program's arguments for `request`'s tokens from
        `start` (at most `size`), and how many there are."""
        chunk = request.encoding[start:start + size]
        n = len(chunk)
        own = start + np.arange(size)
        real = np.arange(size) < n
        tokens = np.full((1, size), self.forward.pad_token_id, "int32")
        tokens[0, :n] = chunk
        # A prompt's slots are its own positions (no wrap: the window has a
        # chunk of room past the longest prompt).
        slots = np.arange(self.prefill_capacity)
        arguments = dict(
            tokens=tokens,
            clock=np.int32(start),
            # Padding reads row 0 of a position table (its keys are masked).
            row_positions=np.where(real, own, 0)[None].astype("int32"),
            gather=self._gather_index([request], slots, np.zeros(1, "int64"),
                                      np.array([start])),
            key_positions=slots.astype("int32"),
            key_valid=((slots < start) & _real_at(request, slots))[None],
            real_tokens=np.array([request.real[:start].sum()], "int32"),
            padding_mask=real[None],
            write=np.where(real, self._entries(request, np.minimum(own, start + n - 1)), 0)[
                None].astype("int32"),
            last=np.array([[n - 1]], "int32"),
            key_row_positions=slots[None].astype("int32"),
            # A length-reading rope scaling sees the whole sequence, as the
            # full pass of `generate`'s prompt.
            rotary_lengths=np.array([len(request.encoding)], "int32"),
            **_segments(1, size, self.prefill_capacity),
        )
        if self.unilm:
            # Encoded again after a preemption, a UniLM request's generated
            # tokens are its second segment: each sees the source and the
            # generated tokens up to itself, as when it was decoded.
            arguments["segment_ids"][0, :n] = own[:n] >= len(request.prompt)
        return arguments, n

    def _encode_again(self):
        """LongRoPE (`recompute_length` L): a row about to encode position
        L leaves its row and encodes its whole sequence again, long, as a
        prompt first in line (its blocks rewritten), as `generate` does at
        that step; its next token comes from that pass."""
        if self.recompute_length is None:
            return
        for index, request in enumerate(self._rows):
            if request is not None and request.written == self.recompute_length:
                self._rows[index] = request.row = None
                self._encode_from_start(request)
                self._prefilling.appendleft(request)

    def _fill_rows(self):
        """Prefilled requests take the free decoding rows, in order."""
        while self._ready and None in self._rows:
            request = self._ready.popleft()
            request.row = self._rows.index(None)
            if self.seq2seq:
                self.programs.put_source(request.row, request.encoded_source)
            # The clock of the next step minus the row's own position.
            request.offset = self._clock - request.written
            self._rows[request.row] = request

    def _window(self, requests):
        """How many of the latest clocks a decoding step reads: the
        smallest `block_size * 2**k` (at most `capacity`) that holds every
        position of the longest row, the new token's included. A row's
        positions are the clocks since it joined, so a shorter window reads
        the same keys; one program per window size."""
        return self._window_of(max(request.written for request in requests) + 1)

    def _window_of(self, needed):
        window = self.block_size
        while window < needed and window < self.capacity:
            window *= 2
        return min(window, self.capacity)

    def _lend_rows(self):
        """Each row's next position, the earliest admitted first."""
        for request in sorted(filter(None, self._rows), key=lambda r: r.admitted):
            if request.row is not None:
                self._lend(request, request.written + 1)

    def _decode(self):
        self._lend_rows()
        if not any(self._rows):
            return
        rows = self._rows
        window = self._window([request for request in rows if request is not None])
        logits = self.programs.run(
            self._decode_arguments(rows, self._clock, window), window, self.programs.sources
        )
        self._decoded(rows, logits)

    def _decoded(self, rows, logits):
        """After a decoding step of `rows`: the clock moves on and each
        row's next token is chosen from its `logits`."""
        clock = self._clock
        self._clock = clock + 1
        if self._clock >= CLOCK_LIMIT:
            # Rebase the clock by whole turns of the window: nothing the
            # rows read changes (their offsets move with it).
            turns = (self._clock - self.capacity) // self.capacity * self.capacity
            self._clock -= turns
            for request in rows:
                if request is not None:
                    request.offset -= turns
        for index, request in enumerate(rows):
            if request is None:
                continue
            request.written += 1
            token = self._choose(request, logits[index])
            if not self._after_token(request, token):
                request.next_token = token

    def _decode_arguments(self, rows, clock, window):
        """The decoding program's arguments for `rows` (None: an idle row)
        at `clock`, reading the latest `window` clocks."""
        slots = np.arange(window)
        # The clock each slot holds: the latest at or before `clock` whose
        # slot it is (`clock % window` is the new tokens').
        held = clock - np.mod(clock - slots, window)
        tokens = np.full((self.max_batch, 1), self.forward.pad_token_id, "int32")
        positions = np.zeros((self.max_batch, 1), "int32")
        write = np.zeros((self.max_batch, 1), "int32")
        written = np.zeros((self.max_batch,), "int64")
        real_tokens = np.zeros((self.max_batch,), "int32")
        offsets = np.zeros((self.max_batch,), "int64")
        active = np.array([r is not None for r in rows])
        real = np.zeros((self.max_batch, window), bool)
        for index, request in enumerate(rows):
            if request is None:
                continue
            if self.forward.masks_pad_tokens and request.next_token == self.forward.pad_token_id:
                request.real[request.written] = False
            real_tokens[index] = request.real[:request.written].sum()
            real[index] = _real_at(request, held - request.offset)
            tokens[index, 0] = request.next_token
            positions[index, 0] = request.written
            write[index, 0] = self._entries(request, np.array([request.written]))[0]
            written[index] = request.written
            offsets[index] = request.offset
        own = held[None, :] - offsets[:, None]
        segments = _segments(self.max_batch, 1, window)
        if self.unilm:
            # A generated token's order is its count among the generated
            # (the source's is 0): it sees the source and the tokens before
            # it (`masking.sequence_mask`).
            sources = np.array([0 if r is None else len(r.prompt) for r in rows])
            segments["segment_ids"][active] = 1
            segments["segment_sums"][active] = (written - sources)[active]
            segments["key_orders"][:] = np.maximum(own - sources[:, None] + 1, 0) * active[:, None]
        arguments = dict(
            tokens=tokens,
            clock=np.int32(clock),
            row_positions=positions,
            gather=self._gather_index(rows, held, offsets, written),
            key_positions=held.astype("int32"),
            key_valid=(own >= 0) & (own < written[:, None]) & real,
            real_tokens=real_tokens,
            padding_mask=active[:, None],
            write=write,
            last=np.zeros((self.max_batch, 1), "int32"),
            key_row_positions=own.astype("int32"),
            rotary_lengths=(written + 1).astype("int32"),
            **segments,
        )
        return arguments

    def _packed_arguments(self, decode, prefill, others=()):
        """The packed program's arguments and capacity: the decoding rows'
        tokens (`decode`, `_decode_arguments`), then the prompt chunk's
        (`prefill`, `_prefill_arguments`) and each of `others`' (whole
        prompts' `_prefill_arguments`, in the chunk's padding) in one row,
        over the rows' windows, the first prompt's slots and the new tokens'
        slots laid end to end, each query seeing its own request's slots
        (`query_owners`, `key_owners`). The new tokens' slots come last:
        the shared position starts there, so that the chunk never wraps;
        causality within a request follows from their order, every other
        slot is before them. `packing` names the layout (`PackedRows`), so
        that attention runs on each query's blocks of slots."""
        rows = self.max_batch
        window = decode["gather"].shape[1]
        own_slots = rows * window + self.prefill_capacity
        size = prefill["tokens"].shape[1]
        chunk = {name: prefill[name][0].copy()
                 for name in ("tokens", "row_positions", "padding_mask", "write")}
        chunk_owners = np.full(size, rows)
        used = prefill["last"][0, 0] + 1  # the first prompt's tokens
        last = np.zeros(PACKED_PROMPTS, "int32")
        last[0] = rows + used - 1
        for index, other in enumerate(others, 1):
            n = other["tokens"].shape[1]
            for name, values in chunk.items():
                values[used:used + n] = other[name][0]
            chunk_owners[used:used + n] = rows + index
            last[index] = rows + used + n - 1
            used += n

        def tokens(name):  # decoding rows' (one each), then the chunk's
            return np.concatenate([decode[name][:, 0], chunk[name]])[None]

        def slots(name, new):  # the rows' windows, the prompt's, the new tokens'
            return np.concatenate([decode[name].reshape(-1), prefill[name][0], new])[None]

        row_positions = tokens("row_positions")
        owners = np.concatenate([np.arange(rows), chunk_owners]).astype("int32")[None]
        arguments = dict(
            tokens=tokens("tokens"),
            clock=np.int32(own_slots),
            row_positions=row_positions,
            gather=slots("gather", np.zeros(rows + size, "int32")),
            key_positions=np.zeros(own_slots + rows + size, "int32"),
            key_valid=slots("key_valid", np.zeros(rows + size, bool)),
            real_tokens=np.zeros(1, "int32"),
            padding_mask=tokens("padding_mask"),
            write=tokens("write"),
            last=np.concatenate([np.arange(rows), last])[None].astype("int32"),
            key_row_positions=slots("key_row_positions", row_positions[0]),
            rotary_lengths=np.ones(1, "int32"),
            query_owners=owners,
            key_owners=np.concatenate([
                np.repeat(np.arange(rows), window), np.full(self.prefill_capacity, rows),
                owners[0],
            ]).astype("int32")[None],
            **_segments(1, rows + size, own_slots + rows + size),
            packing=PackedRows(rows, window),
        )
        return arguments, own_slots + rows + size

    def _choose(self, request, logits):
        token = choose_token(
            logits, request.params, request.prompt + request.tokens, len(request.tokens),
            request.params.end_token_ids, self._rng,
        )
        if request.params.logprobs is not None:
            request.logprobs.append(token_logprob(logits, token, request.params.logprobs))
        return token

    def _after_token(self, request, token):
        """Records `token` and finishes the request if it ends it (an end
        token, a stop string, its length). Returns whether it finished."""
        stopped = request._add(token)
        reason = None
        if stopped or token in request.params.end_token_ids:
            reason = "stop"
        elif len(request.tokens) >= request.params.max_new_tokens:
            reason = "length"
        if reason is None:
            request._publish()
            return False
        self._finish(request, reason, stopped)
        return True

    def _finish(self, request, reason, stopped=False):
        request.encoded_source = None
        if request.table is not None:
            self.pool.release(request.table)
            request.table = None
        if request.row is not None and self._rows[request.row] is request:
            self._rows[request.row] = None
        for line in (self._prefilling, self._ready):
            if request in line:
                line.remove(request)
        if not request.finished:
            request._publish(reason, stopped)

    # Programs -------------------------------------------------------------

    def _encode(self, source):
        """The `EncodedSource` of one request's source ids, padded to
        `source_length` (pad ids are padding, as in the full pass)."""
        ids = np.full((1, self.source_length), self.forward.pad_token_id, "int32")
        ids[0, :len(source)] = source
        valid = np.arange(self.source_length)[None] < len(source)
        if self.forward.plan.pad_token_id is not None:
            valid &= ids != self.forward.plan.pad_token_id
        return self.programs.encode(ids, valid)

    def _entries(self, request, positions):
        """The pool entries of `request`'s own `positions`."""
        table = np.asarray(request.table)
        return table[positions // self.block_size] * self.block_size + positions % self.block_size

    def _gather_index(self, rows, held, offsets, written):
        """int32 `(rows, slots)`: the pool entry each row reads at each slot
        (the scratch entry 0 where it holds nothing of the row's)."""
        index = np.zeros((len(rows), len(held)), "int32")
        for row, request in enumerate(rows):
            if request is None:
                continue
            own = held - offsets[row]
            valid = (own >= 0) & (own < written[row])
            index[row, valid] = self._entries(request, own[valid])
        return index



def default_prefill_chunk(max_batch):
    """The prompt tokens an engine of `max_batch` rows encodes per step by
    default: 4 per row, at least 32. Rows free up about as often as
    requests end, and each new one brings its prompt: a chunk that grows
    with the rows keeps them fed, while every packed step, of fixed shape,
    costs the whole chunk (docs/serving.md, "Packed steps")."""
    return max(32, 4 * max_batch)


def _real_at(request, positions):
    """Whether each of `request`'s own `positions` holds a real token
    (False outside its positions)."""
    inside = (positions >= 0) & (positions < len(request.real))
    return inside & request.real[np.clip(positions, 0, len(request.real) - 1)]


def _segments(batch, length, capacity):
    """UniLM's arguments of a step, zeros (a source, or a causal model):
    the new tokens' segment ids, each slot's order and each row's count of
    generated tokens written (see `DecodingCache`)."""
    return dict(
        segment_ids=np.zeros((batch, length), "int32"),
        key_orders=np.zeros((batch, capacity), "int32"),
        segment_sums=np.zeros((batch,), "int32"),
    )


def unsupported(forward):
    """Why `Engine` cannot serve the model of `forward`, or None."""
    scaling = forward.plan.rope_scaling
    if forward.application not in ("lm", "unilm", "seq2seq"):
        return (f"it is a {forward.application!r} model; the engine serves "
                "application='lm', 'unilm' and 'seq2seq' models.")
    if forward.conditional:
        return "its norms take a `condition` (conditional_layer_norm), which no request gives."
    if scaling is not None and scaling["rope_type"] in CLIPPED_TYPES:
        return (f"its rope_scaling {scaling['rope_type']!r} clips relative positions in the "
                "scores, which the engine's shared clock does not give per row.")
    if forward.length_dependent:
        mixed = [block.attention for block in forward.blocks
                 if block.attention.compute_dtype != "float32"]
        if mixed:
            return (f"its rope_scaling {scaling['rope_type']!r} reads each row's length, which "
                    f"the step's float32 rotary tables give; attention {mixed[0].name!r} "
                    f"computes in {mixed[0].compute_dtype} (serve it with a float32 dtype "
                    "policy).")
    return None


def _longest_request(forward, max_length):
    """The `max_length` of an `Engine` over `forward`: the one given, or by
    default the model's `max_position_embeddings` (at most its position
    table's length); a ValueError unless an integer >= 2 within the table."""
    if max_length is None:
        max_length = forward.plan.max_position
        if forward.max_length is not None:
            max_length = min(max_length, forward.max_length)
    if not isinstance(max_length, int) or max_length < 2:
        raise ValueError(f"`max_length` must be an integer >= 2; received {max_length!r}.")
    if forward.max_length is not None and max_length > forward.max_length:
        raise ValueError(
            f"`max_length={max_length}` exceeds the {forward.max_length} positions of "
            f"{forward.model.name}'s position table."
        )
    return max_length


