"""One local model serving many episodes at once: lockstep batches of turns, with reuse of cached prefixes.

On a CPU, decoding a small model is bound by memory bandwidth (every new token reads all weights),
so sequences decoded together share that cost, and re-reading a long transcript (prefill) costs
more than writing a short turn. ``forecast-dojo run --concurrency N`` plays N episodes in threads;
their :class:`~forecast_dojo.agents.llm.TransformersAgent` objects share one
:class:`GenerationBatcher`, which

* gathers the turns of concurrent episodes into one batch (*lockstep*): a batch starts when every
  live session (an episode's agent, from :meth:`~GenerationBatcher.new_session` until
  :meth:`~GenerationBatcher.forget`) has a request waiting, i.e. has come back from its
  ``env.step``, when ``max_batch`` are waiting, or when no new request arrived for ``wait_s``.
  A study's first round (no session live before it, or none since the last one ended) waits for
  ``max_batch`` requests or until no session was made and no request came for ``start_wait_s``:
  the episodes' threads build their envs at different speeds, and a turn that ran alone while the
  others were still starting would keep its episode a turn ahead of theirs;
* generates them as one left-padded batch with HF ``generate``, each row stopping at the end of its
  turn: the stop token (``<|im_end|>``) or the end of a stop string (``</tool_call>``: a turn holds
  one call, and the model never gets to write the tool's answer itself);
* keeps, per episode (*session*), the key/value cache of its transcript so far, and starts the
  next turn from the longest cached prefix of any session: the rest of the episode's own
  transcript, or the system prompt and question shared with other episodes. Only the tokens
  after that prefix are computed (prefill). Rows with prefixes of different lengths are padded
  inside the sequence (``[pad][cached prefix][pad][new tokens]``); position ids follow the
  attention mask, so each row sees exactly its own sequence.

Each request gets exactly its own new tokens back, cut after its stop. Greedy results equal
unbatched, uncached generation up to floating-point differences of the padded matrix products
(a near-tie between two tokens can resolve the other way; ``tests/agents/test_batching.py``
checks equality on a small random model).
"""

from __future__ import annotations

import itertools
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.errors import ConfigError


@dataclass
class _Request:
    ids: list[int]
    options: tuple[tuple[str, Any], ...]
    session: int | None = None
    labels: tuple[str, ...] | None = None  # the outcome labels its evidence must name (constrained decoding)
    wake: threading.Event = field(default_factory=threading.Event)  # finished, or promoted to leader
    result: list[int] | None = None
    constrained_tokens: int = 0  # of its new tokens, those the evidence-label constraint chose
    error: BaseException | None = None

    @property
    def finished(self) -> bool:
        return self.result is not None or self.error is not None


@dataclass
class _Entry:
    """A session's cached transcript: its token ids and, per layer, keys and values ``[heads, len, dim]``."""

    ids: Any  # torch.LongTensor [len]
    layers: list[tuple[Any, Any]]


@dataclass(frozen=True)
class GeneratedTurn:
    """One request's reply: its new tokens, and how many of them the evidence-label constraint chose.

    ``constrained_tokens`` counts the positions where the constraint
    (:class:`~forecast_dojo.agents.constrained.EvidenceLabelsProcessor`) kept a token other than the
    model's own first choice: 0 for a request without labels, and for one the constraint never had to
    correct.
    """

    tokens: list[int]
    constrained_tokens: int = 0


@dataclass
class BatcherStats:
    """What the batcher did, for benchmarks and tests (counts since it was made)."""

    batch_sizes: list[int] = field(default_factory=list)
    prompt_tokens: int = 0  # tokens of all prompts
    reused_tokens: int = 0  # of them, taken from a cached prefix (not computed again)
    generated_tokens: int = 0  # new tokens handed back
    # of them, tokens the evidence-label constraint chose over the model's first choice
    constrained_tokens: int = 0
    generate_s: float = 0.0  # seconds spent in ``model.generate``


class _StopAfter:
    """HF stopping criterion: a row is done once its new tokens' text contains one of the stop strings."""

    def __init__(self, tokenizer: Any, stop_strings: Sequence[str], prompt_width: int) -> None:
        self.tokenizer = tokenizer
        self.stop_strings = tuple(stop_strings)
        self.prompt_width = prompt_width
        self.window = 2 + max(len(s) for s in self.stop_strings)  # tokens: at least one character each
        self.stopped_at: dict[int, int] = {}  # row -> number of new tokens up to and including the stop

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        done = torch.zeros(input_ids.shape[0], dtype=torch.bool, device=input_ids.device)
        new = input_ids.shape[1] - self.prompt_width
        for row in range(input_ids.shape[0]):
            if row in self.stopped_at:
                done[row] = True
                continue
            tail = input_ids[row, max(self.prompt_width, input_ids.shape[1] - self.window) :].tolist()
            text = self.tokenizer.decode(tail)
            if any(s in text for s in self.stop_strings):
                self.stopped_at[row] = new
                done[row] = True
        return done


class GenerationBatcher:
    """Run ``model.generate`` for requests from many threads as lockstep batches (thread-safe).

    The first thread to arrive while no batch is running becomes the leader: it waits for the
    round's other requests (see the module docstring), runs batches of up to ``max_batch`` requests
    with identical options until none are pending, and hands every caller its tokens. Other threads
    wait for theirs.

    Args:
        model: a causal LM (``transformers.PreTrainedModel``).
        tokenizer: its tokenizer (its padding token pads; the stop token otherwise).
        stop_token_id: the token that ends a reply (``<|im_end|>`` for ChatML models).
        stop_strings: texts that also end a reply, kept in it (default: none).
        max_batch: the most sequences generated together.
        wait_s: how long a leader waits for the next request before it starts a smaller batch.
        start_wait_s: in a study's first round (see the module docstring), how long a leader waits
            for the next session or request before it starts with fewer than ``max_batch``
            (0: as any other round).
        reuse_prefix: keep each session's key/value cache and start from the longest cached prefix.
        cache_tokens: the most tokens kept in cached prefixes (least recently used sessions go first).
    """

    def __init__(
        self,
        model: Any,
        tokenizer: Any,
        *,
        stop_token_id: int,
        stop_strings: Sequence[str] = (),
        max_batch: int = 8,
        wait_s: float = 0.05,
        start_wait_s: float = 0.0,
        reuse_prefix: bool = False,
        cache_tokens: int = 65_536,
    ) -> None:
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, got {max_batch}")
        if not (wait_s >= 0 and start_wait_s >= 0):  # also refuses NaN
            raise ConfigError(
                f"wait_s and start_wait_s must be >= 0 seconds, got {wait_s} and {start_wait_s}"
            )
        self.model = model
        self.tokenizer = tokenizer
        self.stop_token_id = stop_token_id
        self.stop_strings = tuple(s for s in stop_strings if s)
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.start_wait_s = start_wait_s
        self.reuse_prefix = reuse_prefix
        self.cache_tokens = cache_tokens
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_token_id
        self.stats = BatcherStats()
        self._lock = threading.Lock()
        self._arrived = threading.Condition(self._lock)
        self._pending: list[_Request] = []
        self._leading = False
        self._live: set[int] = set()  # sessions whose episodes are being played
        self._last_arrival = 0.0
        self._last_session = 0.0
        self._starting = True  # no batch of sessions has run since none was live: a study is starting
        self._sessions = itertools.count()
        self._cache: OrderedDict[int, _Entry] = OrderedDict()  # session -> entry, least recent first
        self._token_texts: list[str] | None = None  # for constrained decoding, computed when first needed

    @property
    def batch_sizes(self) -> list[int]:
        """One entry per batch run: how full the batches were."""
        return self.stats.batch_sizes

    def new_session(self) -> int:
        """A key for one episode's turns (its cached transcript); :meth:`forget` it when the episode ends."""
        with self._lock:
            session = next(self._sessions)
            self._live.add(session)
            self._last_session = time.monotonic()
            self._arrived.notify_all()
            return session

    def forget(self, session: int) -> None:
        """The session's episode ended: drop its cached transcript, and wait no more for its turns."""
        with self._lock:
            self._cache.pop(session, None)
            self._live.discard(session)
            if not self._live:  # every episode ended: the next turn starts a study again
                self._starting = True
            self._arrived.notify_all()

    def generate(
        self,
        ids: list[int],
        *,
        session: int | None = None,
        labels: Sequence[str] | None = None,
        **options: Any,
    ) -> list[int]:
        """The new tokens for one prompt (up to and including its stop): :meth:`generate_turn`'s tokens."""
        return self.generate_turn(ids, session=session, labels=labels, **options).tokens

    def generate_turn(
        self,
        ids: list[int],
        *,
        session: int | None = None,
        labels: Sequence[str] | None = None,
        **options: Any,
    ) -> GeneratedTurn:
        """The reply to one prompt: its new tokens (up to and including its stop) and the constraint's count.

        Args:
            ids: the prompt's token ids.
            session: the episode's key (:meth:`new_session`): its transcript's cache is kept and reused.
            labels: the question's outcome labels: the reply's ``submit_forecast`` evidence may name
                only these (:class:`~forecast_dojo.agents.constrained.EvidenceLabelsProcessor`);
                requests with and without labels share batches.
            **options: ``model.generate`` options (``max_new_tokens``, ``do_sample``, ``temperature``);
                requests are batched only with requests of the same options.

        Returns:
            The generated token ids, and how many of them the evidence-label constraint chose over
            the model's first choice.
        """
        request = _Request(
            list(ids), tuple(sorted(options.items())), session, tuple(labels) if labels else None
        )
        with self._lock:
            self._pending.append(request)
            self._last_arrival = time.monotonic()
            self._arrived.notify_all()
            lead = not self._leading
            if lead:
                self._leading = True
        while True:
            if lead:
                self._lead(request)
            request.wake.wait()
            with self._lock:
                if request.finished:
                    break
                request.wake.clear()  # the previous leader handed over: lead the next round
                lead = True
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return GeneratedTurn(request.result, request.constrained_tokens)

    def _gather(self) -> None:
        """Wait (holding the lock's condition) until the round's requests are in, or none came for ``wait_s``.

        In a study's first round (:attr:`start_wait_s` > 0, and the requests are sessions' turns), the
        round is ``max_batch`` requests, and the wait is for ``start_wait_s`` without a new session or
        request: episodes whose threads are still building their envs have no session yet.
        """
        starting = (
            self.start_wait_s > 0 and self._starting and any(r.session is not None for r in self._pending)
        )
        while True:
            if starting:
                wanted, wait_s = self.max_batch, self.start_wait_s
                last = max(self._last_arrival, self._last_session)
            else:
                wanted = min(len(self._live) or self.max_batch, self.max_batch)
                wait_s, last = self.wait_s, self._last_arrival
            if len(self._pending) >= wanted:
                return
            quiet = time.monotonic() - last
            if quiet >= wait_s:
                return
            self._arrived.wait(wait_s - quiet)

    def _lead(self, own: _Request) -> None:
        """Run batches until the leader's own request is served, then hand the lead to a waiting request."""
        while True:
            with self._lock:
                if own.finished:
                    if self._pending:  # its caller must go back to its episode: a waiting thread leads
                        self._pending[0].wake.set()
                    else:
                        self._leading = False
                    return
                self._gather()
                options = self._pending[0].options
                batch = [r for r in self._pending if r.options == options][: self.max_batch]
                self._pending = [r for r in self._pending if r not in batch]
                if any(r.session is not None for r in batch):
                    self._starting = False
            try:
                results = self._run(batch, dict(options))
            except BaseException as err:  # every caller of the batch gets the error, the leader goes on
                for request in batch:
                    request.error = err
                    request.wake.set()
                continue
            for request, result in zip(batch, results, strict=True):
                request.result = result
                request.wake.set()

    # -- prefix cache ---------------------------------------------------------------------------

    def _longest_prefix(self, request: _Request) -> tuple[int, _Entry | None]:
        """The longest cached prefix of the request's prompt (leaving at least one token to compute)."""
        import torch

        if not self.reuse_prefix or len(request.ids) < 2:
            return 0, None
        query = torch.tensor(request.ids, dtype=torch.long)
        best, best_entry = 0, None
        with self._lock:
            entries = list(self._cache.items())
        own = [e for key, e in entries if key == request.session]
        for entry in own + [e for key, e in entries if key != request.session]:
            k = min(len(query) - 1, len(entry.ids))
            if k <= best:
                continue
            differ = (entry.ids[:k] != query[:k]).nonzero()
            length = int(differ[0, 0]) if len(differ) else k
            if length > best:
                best, best_entry = length, entry
        return best, best_entry

    def _store(self, session: int, ids: list[int], layers: list[tuple[Any, Any]]) -> None:
        import torch

        with self._lock:
            self._cache.pop(session, None)
            self._cache[session] = _Entry(torch.tensor(ids, dtype=torch.long), layers)
            total = sum(len(e.ids) for e in self._cache.values())
            while total > self.cache_tokens and len(self._cache) > 1:
                _, dropped = self._cache.popitem(last=False)
                total -= len(dropped.ids)

    def _run(self, batch: list[_Request], options: dict[str, Any]) -> list[list[int]]:
        import torch

        self.stats.batch_sizes.append(len(batch))
        prefixes = [self._longest_prefix(r) for r in batch]
        cached = max(length for length, _ in prefixes)  # C: width of the cached part
        width = max(len(r.ids) - length for r, (length, _) in zip(batch, prefixes, strict=True))  # W
        total = cached + width
        input_ids = torch.full((len(batch), total), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), total), dtype=torch.long)
        for row, (request, (length, _)) in enumerate(zip(batch, prefixes, strict=True)):
            ids = torch.tensor(request.ids, dtype=torch.long)
            input_ids[row, cached - length : cached] = ids[:length]
            attention_mask[row, cached - length : cached] = 1
            fresh = len(request.ids) - length
            input_ids[row, total - fresh :] = ids[length:]
            attention_mask[row, total - fresh :] = 1
        # a model on a GPU generates there, and its cached prefixes live there too
        device = getattr(self.model, "device", None)
        if device is not None:
            input_ids, attention_mask = input_ids.to(device), attention_mask.to(device)
        extra: dict[str, Any] = {}
        if cached:
            extra["cache"] = self._batch_cache(prefixes, cached)
        stop = _StopAfter(self.tokenizer, self.stop_strings, total) if self.stop_strings else None
        if stop is not None:
            from transformers import StoppingCriteriaList

            extra["stopping_criteria"] = StoppingCriteriaList([stop])
        constraint = self._constraint(batch, total, options)
        if constraint is not None:
            from transformers import LogitsProcessorList

            extra["logits_processor"] = LogitsProcessorList([constraint])
        started = time.perf_counter()
        with torch.no_grad():
            output = self.model.generate(
                input_ids,
                attention_mask=attention_mask,
                eos_token_id=self.stop_token_id,
                pad_token_id=self.pad_token_id,
                return_dict_in_generate=True,
                **extra,
                **options,
            )
        self.stats.generate_s += time.perf_counter() - started
        sequences = output.sequences if hasattr(output, "sequences") else output
        results = []
        for row, tokens in enumerate(sequences[:, total:].tolist()):
            end = tokens.index(self.stop_token_id) + 1 if self.stop_token_id in tokens else len(tokens)
            if stop is not None and row in stop.stopped_at:
                end = min(end, stop.stopped_at[row])
            results.append(tokens[:end])
        self.stats.prompt_tokens += sum(len(r.ids) for r in batch)
        self.stats.reused_tokens += sum(length for length, _ in prefixes)
        self.stats.generated_tokens += sum(len(r) for r in results)
        if constraint is not None:
            self.stats.constrained_tokens += sum(constraint.changed)
            for request, changed in zip(batch, constraint.changed, strict=True):
                request.constrained_tokens = changed
        new_cache = getattr(output, "cache", None) if self.reuse_prefix else None
        if new_cache is not None:
            self._keep(batch, results, attention_mask, total, new_cache)
        return results

    def _constraint(self, batch: list[_Request], width: int, options: dict[str, Any]) -> Any:
        """The evidence-label logits processor of a batch, or None when no request names labels."""
        if not any(r.labels for r in batch):
            return None
        from forecast_dojo.agents.constrained import EvidenceLabelsProcessor, token_texts

        if self._token_texts is None:
            self._token_texts = token_texts(self.tokenizer)
        return EvidenceLabelsProcessor(
            self._token_texts, [r.labels for r in batch], width, greedy=not options.get("do_sample", False)
        )

    def _batch_cache(self, prefixes: list[tuple[int, _Entry | None]], width: int) -> Any:
        """A cache of the rows' prefixes, each left-padded to ``width`` positions."""
        import torch
        from transformers import DynamicCache

        template = next(entry for _, entry in prefixes if entry is not None)
        layers = []
        for index, (keys0, values0) in enumerate(template.layers):
            heads, dim = keys0.shape[0], keys0.shape[-1]
            keys = torch.zeros((len(prefixes), heads, width, dim), dtype=keys0.dtype, device=keys0.device)
            values = torch.zeros(
                (len(prefixes), heads, width, values0.shape[-1]), dtype=values0.dtype, device=values0.device
            )
            for row, (length, entry) in enumerate(prefixes):
                if entry is not None and length:
                    keys[row, :, width - length :] = entry.layers[index][0][:, :length]
                    values[row, :, width - length :] = entry.layers[index][1][:, :length]
            layers.append((keys, values))
        return DynamicCache(ddp_cache_data=layers, config=self.model.config)

    def _keep(
        self, batch: list[_Request], results: list[list[int]], mask: Any, width: int, cache: Any
    ) -> None:
        """Store each session's transcript (prompt and reply but its last token) from the batch's cache."""
        import torch

        for row, (request, result) in enumerate(zip(batch, results, strict=True)):
            if request.session is None or not result:
                continue
            positions = torch.cat(
                [mask[row].nonzero()[:, 0], torch.arange(width, width + len(result) - 1, device=mask.device)]
            )
            layers = [
                (layer.keys[row][:, positions], layer.values[row][:, positions]) for layer in cache.layers
            ]
            self._store(request.session, request.ids + result[:-1], layers)
