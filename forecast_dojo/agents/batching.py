"""One local model serving many episodes at once: generation requests from threads, run as padded batches.

On a CPU, decoding a small model is bound by memory bandwidth (every new token reads all weights:
about 130 ms per token for SmolLM2-135M in float32 on 2 cores here), so sequences decoded together
share that cost. ``forecast-dojo run --concurrency N`` plays
N episodes in threads; their :class:`~forecast_dojo.agents.llm.TransformersAgent` objects share one
:class:`GenerationBatcher`, which gathers the requests that arrive together and generates them as
one left-padded batch. Each request gets exactly its own new tokens back, cut after its first stop
token. Greedy results equal unbatched generation up to floating-point differences of the padded
matrix products (a near-tie between two tokens can resolve the other way).
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Any

from forecast_dojo.errors import ConfigError


@dataclass
class _Request:
    ids: list[int]
    options: tuple[tuple[str, Any], ...]
    done: threading.Event = field(default_factory=threading.Event)
    result: list[int] | None = None
    error: BaseException | None = None


class GenerationBatcher:
    """Run ``model.generate`` for requests from many threads as batches (thread-safe).

    The first thread to arrive while no batch is running becomes the leader: it waits ``wait_s``
    for others to join, runs batches of up to ``max_batch`` requests with identical options until
    none are pending, and hands every caller its tokens. Other threads wait for theirs.

    Args:
        model: a causal LM (``transformers.PreTrainedModel``).
        tokenizer: its tokenizer (its padding token pads; the end-of-sequence token otherwise).
        stop_token_id: the token that ends a reply (``<|im_end|>`` for ChatML models).
        max_batch: the most sequences generated together.
        wait_s: how long a leader waits for more requests before it starts a batch.
    """

    def __init__(
        self, model: Any, tokenizer: Any, *, stop_token_id: int, max_batch: int = 8, wait_s: float = 0.05
    ) -> None:
        if max_batch < 1:
            raise ConfigError(f"max_batch must be at least 1, got {max_batch}")
        self.model = model
        self.tokenizer = tokenizer
        self.stop_token_id = stop_token_id
        self.max_batch = max_batch
        self.wait_s = wait_s
        self.pad_token_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_token_id
        self.batch_sizes: list[int] = []  # one entry per batch run: how full the batches were
        self._lock = threading.Lock()
        self._pending: list[_Request] = []
        self._leading = False

    def generate(self, ids: list[int], **options: Any) -> list[int]:
        """The new tokens for one prompt (up to and including the stop token).

        Args:
            ids: the prompt's token ids.
            **options: ``model.generate`` options (``max_new_tokens``, ``do_sample``, ``temperature``);
                requests are batched only with requests of the same options.

        Returns:
            The generated token ids.
        """
        request = _Request(list(ids), tuple(sorted(options.items())))
        with self._lock:
            self._pending.append(request)
            lead = not self._leading
            if lead:
                self._leading = True
        if lead:
            self._lead()
        request.done.wait()
        if request.error is not None:
            raise request.error
        assert request.result is not None
        return request.result

    def _lead(self) -> None:
        time.sleep(self.wait_s)
        while True:
            with self._lock:
                if not self._pending:
                    self._leading = False
                    return
                options = self._pending[0].options
                batch = [r for r in self._pending if r.options == options][: self.max_batch]
                self._pending = [r for r in self._pending if r not in batch]
            try:
                results = self._run(batch, dict(options))
            except BaseException as err:  # every caller of the batch gets the error, the leader goes on
                for request in batch:
                    request.error = err
                    request.done.set()
                continue
            for request, result in zip(batch, results, strict=True):
                request.result = result
                request.done.set()

    def _run(self, batch: list[_Request], options: dict[str, Any]) -> list[list[int]]:
        import torch

        self.batch_sizes.append(len(batch))
        width = max(len(r.ids) for r in batch)
        input_ids = torch.full((len(batch), width), self.pad_token_id, dtype=torch.long)
        attention_mask = torch.zeros((len(batch), width), dtype=torch.long)
        for row, request in enumerate(batch):  # left padding: every prompt ends where generation starts
            input_ids[row, width - len(request.ids) :] = torch.tensor(request.ids, dtype=torch.long)
            attention_mask[row, width - len(request.ids) :] = 1
        with torch.no_grad():
            output = self.model.generate(
                input_ids,
                attention_mask=attention_mask,
                eos_token_id=self.stop_token_id,
                pad_token_id=self.pad_token_id,
                **options,
            )
        results = []
        for row in output[:, width:].tolist():
            end = row.index(self.stop_token_id) + 1 if self.stop_token_id in row else len(row)
            results.append(row[:end])
        return results
