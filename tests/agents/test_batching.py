"""GenerationBatcher: threads' requests run as left-padded batches and each caller gets exactly its own tokens."""

from __future__ import annotations

import threading

import pytest

from forecast_dojo.agents.batching import GenerationBatcher
from tests.conftest import tiny_llama

torch = pytest.importorskip("torch")

VOCAB = 97
STOP = 5


class _Tokenizer:
    pad_token_id = 0


@pytest.fixture(scope="module")
def model():
    return tiny_llama(VOCAB, pad_token_id=0).eval()


def _alone(model, ids: list[int], max_new_tokens: int) -> list[int]:
    with torch.no_grad():
        out = model.generate(
            torch.tensor([ids]),
            attention_mask=torch.ones((1, len(ids)), dtype=torch.long),
            eos_token_id=STOP,
            pad_token_id=0,
            max_new_tokens=max_new_tokens,
            do_sample=False,
        )
    new = out[0, len(ids) :].tolist()
    return new[: new.index(STOP) + 1] if STOP in new else new


def _in_threads(batcher: GenerationBatcher, prompts: list[list[int]], **options) -> list:
    results: list = [None] * len(prompts)
    start = threading.Barrier(len(prompts))

    def work(i: int) -> None:
        start.wait()
        try:
            results[i] = batcher.generate(prompts[i], **options)
        except Exception as err:  # noqa: BLE001 - the test inspects what each caller got
            results[i] = err

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(prompts))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    return results


PROMPTS = [[7, 8, 9], [11, 12, 13, 14, 15, 16, 17], [20], [30, 31, 32, 33], [40, 41]]


def test_threads_are_served_in_batches_with_their_own_greedy_tokens(model):
    batcher = GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.2)
    results = _in_threads(batcher, PROMPTS, max_new_tokens=12, do_sample=False)
    assert results == [_alone(model, p, 12) for p in PROMPTS]  # left padding changes no reply
    assert max(batcher.batch_sizes) > 1 and sum(batcher.batch_sizes) == len(PROMPTS)


def test_batches_respect_max_batch_and_only_join_equal_options(model):
    batcher = GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=2, wait_s=0.2)
    results = _in_threads(batcher, PROMPTS, max_new_tokens=6, do_sample=False)
    assert results == [_alone(model, p, 6) for p in PROMPTS]
    assert max(batcher.batch_sizes) <= 2 and sum(batcher.batch_sizes) == len(PROMPTS)

    mixed = GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.2)
    barrier = threading.Barrier(2)
    out: dict[int, list[int]] = {}

    def work(n: int) -> None:
        barrier.wait()
        out[n] = mixed.generate([7, 8, 9], max_new_tokens=n, do_sample=False)

    threads = [threading.Thread(target=work, args=(n,)) for n in (3, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert out == {3: _alone(model, [7, 8, 9], 3), 9: _alone(model, [7, 8, 9], 9)}
    assert mixed.batch_sizes == [1, 1]


def test_replies_are_cut_after_their_stop_token():
    class Echo:  # generates 3, STOP, then padding: the caller gets [3, STOP]
        def generate(self, input_ids, attention_mask, eos_token_id, pad_token_id, **options):
            tail = torch.tensor([[3, eos_token_id, pad_token_id, pad_token_id]] * input_ids.shape[0])
            return torch.cat([input_ids, tail], dim=1)

    batcher = GenerationBatcher(Echo(), _Tokenizer(), stop_token_id=STOP, wait_s=0.0)
    assert batcher.generate([1, 2], max_new_tokens=4) == [3, STOP]


def test_an_error_reaches_every_caller_of_its_batch_and_the_batcher_goes_on(model):
    class Flaky:
        calls = 0

        def generate(self, input_ids, **kwargs):
            Flaky.calls += 1
            if Flaky.calls == 1:
                raise RuntimeError("out of memory")
            return model.generate(input_ids, **kwargs)

    batcher = GenerationBatcher(Flaky(), _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.2)
    results = _in_threads(batcher, PROMPTS[:3], max_new_tokens=4, do_sample=False)
    assert all(isinstance(r, RuntimeError) for r in results)
    assert batcher.generate(PROMPTS[0], max_new_tokens=4, do_sample=False) == _alone(model, PROMPTS[0], 4)


def test_max_batch_must_be_positive(model):
    with pytest.raises(ValueError, match="max_batch"):
        GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=0)
