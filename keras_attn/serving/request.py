"""A request of the serving engine and the deltas it streams."""

import collections
import queue
import threading


class Request:
    """One request of an `Engine`: its prompt, its parameters and, as they
    come, its tokens and text.

    Iterating over a request yields its `Delta`s (new tokens and the text
    they complete) until it finishes; when no thread runs the engine
    (`Engine.start`), iterating drives it (`Engine.step`).

    Attributes:
        prompt: the prompt's token ids.
        params: its `SamplingParams`.
        tokens: the generated token ids so far.
        logprobs: with `params.logprobs`, a `TokenLogprob` per generated
            token (recorded before its delta is given); else empty.
        text: their text so far (with a tokenizer), cut before a stop string.
        finish_reason: None while running, then `"length"` (its
            `max_new_tokens`, or the model's length), `"stop"` (an end token
            or a stop string) or `"cancelled"`.
    """

    def __init__(self, engine, request_id, prompt, params, stream):
        self.engine = engine
        self.request_id = request_id
        self.prompt = prompt
        self.params = params
        self.tokens = []
        self.logprobs = []
        self.text = ""
        self.finish_reason = None
        self._stream = stream
        self._text = ""            # text so far, cut before a stop string
        self._sent = 0             # characters of it given in deltas
        self._scan = 0             # where a stop string could start
        self._unsent = []          # tokens not given in a delta yet
        self._events = queue.Queue()
        self._finished = threading.Event()
        # The engine's bookkeeping.
        self.real = None           # own positions holding a real token (not padding)
        self.table = None          # block ids
        self.written = 0           # positions whose keys are in the blocks
        self.row = None            # the decoding batch row, once prefilled
        self.offset = 0            # clock minus own position, while decoding
        self.source = None         # an encoder-decoder's source ids
        self.encoded_source = None  # and its encoding, kept while preempted
        self.encoding = prompt     # the tokens a prefill encodes (again: LongRoPE, preempted)
        self.admitted = None       # admission order, while it holds blocks

    @property
    def finished(self):
        return self.finish_reason is not None

    def cancel(self):
        """Ends the request at the next step boundary; its blocks are freed."""
        self.engine._cancel(self)

    def result(self, timeout=None):
        """Waits until the request finishes (driving the engine when no
        thread runs it) and returns its tokens."""
        for _ in self:
            pass
        if not self._finished.wait(timeout):
            raise TimeoutError(f"request {self.request_id} did not finish in {timeout} s")
        return self.tokens

    def __iter__(self):
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                if self.engine.running:
                    event = self._events.get()
                else:
                    if self.finished:
                        return
                    self.engine.step()
                    continue
            if event is None:
                return
            yield event

    def _add(self, token):
        """Records a generated token; returns whether a stop string now
        appears in the text (which is cut before it)."""
        self.tokens.append(token)
        self._unsent.append(token)
        if self._stream is None:
            return False
        self._text += self._stream.add([token])
        stops = self.params.stop
        if not stops:
            return False
        hits = [at for at in (self._text.find(stop, self._scan) for stop in stops) if at >= 0]
        if hits:
            self._text = self._text[:min(hits)]
            return True
        self._scan = max(0, len(self._text) - max(map(len, stops)) + 1)
        return False

    def _publish(self, finish_reason=None, stopped=False):
        """Queues a `Delta` of what is new; the text that could begin a stop
        string waits until the next token says it does not."""
        if finish_reason is not None and self._stream is not None and not stopped:
            self._text += self._stream.flush()
        ready = len(self._text)
        if finish_reason is None and self.params.stop:
            ready -= max(map(len, self.params.stop)) - 1
        text = self._text[self._sent:ready] if ready > self._sent else ""
        self._sent = max(self._sent, ready)
        self.text = self._text[:self._sent]
        tokens, self._unsent = self._unsent, []
        if not tokens and not text and finish_reason is None:
            return
        if finish_reason is not None:
            self.finish_reason = finish_reason
        self._events.put(Delta(tokens, text, finish_reason))
        if finish_reason is not None:
            self._events.put(None)
            self._finished.set()


class Delta(collections.namedtuple("Delta", ["tokens", "text", "finish_reason"])):
    """What one step added to a request: token ids, the text they complete
    (UTF-8 safe: characters split across tokens wait for their last piece)
    and, on the last delta, the finish reason."""
