"""GenerationBatcher: threads' requests run as left-padded batches and each caller gets exactly its own tokens."""

from __future__ import annotations

import threading
import time

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

    _join_threads(work, len(prompts))
    return results


def _join_threads(target, n: int) -> None:
    """Run ``target(i)`` for i in 0..n-1, each in a thread of its own, and wait for all of them."""
    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)


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


def test_inputs_go_to_the_models_device():
    """A model on a GPU gets its batch there (``forecast-dojo run --agents hf:...`` on a GPU machine)."""
    seen = []

    class OnMeta:  # a model whose weights live on another device than the CPU
        device = torch.device("meta")

        def generate(self, input_ids, attention_mask, eos_token_id, pad_token_id, **options):
            seen.append((input_ids.device.type, attention_mask.device.type))
            return torch.tensor([[1, 2, 3, eos_token_id]] * input_ids.shape[0])

    batcher = GenerationBatcher(OnMeta(), _Tokenizer(), stop_token_id=STOP, wait_s=0.0)
    assert batcher.generate([1, 2], max_new_tokens=4) == [3, STOP]
    assert seen == [("meta", "meta")]


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
    for wait in ({"wait_s": -1.0}, {"start_wait_s": float("nan")}):
        with pytest.raises(ValueError, match="wait_s"):
            GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, **wait)


def _episodes_starting_at(batcher: GenerationBatcher, delays: list[float], turns: int = 2) -> list:
    """Episodes of ``turns`` turns whose threads make their session after ``delays[i]`` seconds (building an env)."""
    got: list = [[] for _ in delays]

    def episode(i: int) -> None:
        time.sleep(delays[i])
        session = batcher.new_session()
        for turn in range(turns):
            prompt = [20 + i, 30 + turn, 40 + i]
            got[i].append(batcher.generate(prompt, session=session, max_new_tokens=3, do_sample=False))
        batcher.forget(session)

    _join_threads(episode, len(delays))
    return got


def test_a_study_whose_episodes_start_late_plays_its_first_round_together(model):
    """Threads that build their envs at different speeds: the first turn does not run alone and
    keep its episode a turn ahead; each round is one batch of all the episodes."""
    delays = [0.0, 0.3, 0.6]
    batcher = GenerationBatcher(
        model, _Tokenizer(), stop_token_id=STOP, max_batch=3, wait_s=0.05, start_wait_s=5.0
    )
    got = _episodes_starting_at(batcher, delays)
    assert batcher.batch_sizes == [3, 3]
    assert all(len(g) == 2 for g in got)
    # without the start wait the first episode's turn runs alone while the others are still starting
    plain = GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=3, wait_s=0.05)
    assert _episodes_starting_at(plain, delays) == got
    assert plain.batch_sizes[0] == 1 and len(plain.batch_sizes) > 2
    # every episode ended: the next study's first round waits for its late episodes too
    assert _episodes_starting_at(batcher, delays) == got
    assert batcher.batch_sizes == [3, 3, 3, 3]


def test_a_study_with_fewer_episodes_than_max_batch_starts_after_the_start_wait(model):
    batcher = GenerationBatcher(
        model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.05, start_wait_s=0.5
    )
    started = time.monotonic()
    got = _episodes_starting_at(batcher, [0.0, 0.2], turns=3)
    assert time.monotonic() - started < 30 and all(len(g) == 3 for g in got)
    assert batcher.batch_sizes == [2, 2, 2]  # only the first round waited for more


class _MarkTokenizer(_Tokenizer):
    """Decodes token t as ``<t>``: a stop string made of two tokens' marks matches exactly those two tokens."""

    def decode(self, ids, **kwargs) -> str:
        return "".join(f"<{t}>" for t in ids)


def test_a_turn_ends_right_after_its_stop_string(model):
    prompt = PROMPTS[1]
    free = _alone(model, prompt, 12)
    assert STOP not in free[:4]
    stop = f"<{free[2]}><{free[3]}>"
    first = next(i for i in range(1, len(free) + 1) if stop in _MarkTokenizer().decode(free[:i]))
    batcher = GenerationBatcher(model, _MarkTokenizer(), stop_token_id=STOP, stop_strings=(stop,), wait_s=0.0)
    assert batcher.generate(prompt, max_new_tokens=12, do_sample=False) == free[:first]
    # in a batch, the row that meets it stops there and the others run on to their own ends
    results = _in_threads(batcher, [prompt, PROMPTS[3]], max_new_tokens=12, do_sample=False)
    other = _alone(model, PROMPTS[3], 12)
    cut = [i for i in range(1, len(other) + 1) if stop in _MarkTokenizer().decode(other[:i])]
    assert results == [free[:first], other[: cut[0]] if cut else other]


def _conversation(turn: int, index: int, replies: list[list[int]]) -> list[int]:
    """Turn ``turn`` of episode ``index``: a shared system prefix, the episode's question, then each
    earlier reply followed by a 'tool result' (new tokens), as a transcript grows."""
    ids = [3, 4, 6, 7, 8, 9, 10] + [20 + index, 30 + index]
    for t, reply in enumerate(replies[:turn]):
        ids += reply + [40 + t, 50 + index, 60 + (t * 7 + index) % 30]
    return ids


def test_lockstep_sessions_reuse_cached_prefixes_and_end_at_different_times(model):
    """Episodes of 1-4 turns: every turn equals unbatched, uncached generation of its whole prompt;
    the batches shrink as episodes end (no waiting for an ended one); cached prefixes are reused."""
    batcher = GenerationBatcher(
        model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=60.0, reuse_prefix=True
    )
    turns = [1, 2, 3, 4]
    sessions = [batcher.new_session() for _ in turns]
    got: list[list[list[int]]] = [[] for _ in turns]
    prompts: list[list[list[int]]] = [[] for _ in turns]

    def episode(i: int) -> None:
        for turn in range(turns[i]):
            prompt = _conversation(turn, i, got[i])
            prompts[i].append(prompt)
            got[i].append(batcher.generate(prompt, session=sessions[i], max_new_tokens=6, do_sample=False))
        batcher.forget(sessions[i])

    started = time.monotonic()
    threads = [threading.Thread(target=episode, args=(i,)) for i in range(len(turns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert time.monotonic() - started < 60  # an ended episode was never waited for
    for i in range(len(turns)):
        assert got[i] == [_alone(model, p, 6) for p in prompts[i]], i
    assert batcher.batch_sizes == [4, 3, 2, 1]  # lockstep: each round is one batch of the live episodes
    stats = batcher.stats
    assert stats.reused_tokens > 0.5 * (stats.prompt_tokens - sum(len(p[0]) for p in prompts))
    assert stats.generated_tokens == sum(len(r) for g in got for r in g)
    assert not batcher._cache and not batcher._live  # forgotten sessions free their caches


def test_prefix_reuse_gives_the_same_tokens_as_recomputing(model):
    plain = GenerationBatcher(model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.2)
    cached = GenerationBatcher(
        model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.2, reuse_prefix=True
    )
    first = [_conversation(0, i, []) for i in range(3)]
    replies = _in_threads(cached, first, max_new_tokens=5, do_sample=False)
    assert replies == _in_threads(plain, first, max_new_tokens=5, do_sample=False)
    second = [
        _conversation(1, i, [replies[i]]) for i in range(3)
    ]  # no sessions: prefixes found across requests
    before = cached.stats.reused_tokens
    assert _in_threads(cached, second, max_new_tokens=5, do_sample=False) == [
        _alone(model, p, 5) for p in second
    ]
    assert cached.stats.reused_tokens - before == 0  # requests without a session keep no cache
    keyed = GenerationBatcher(
        model, _Tokenizer(), stop_token_id=STOP, max_batch=8, wait_s=0.0, reuse_prefix=True, cache_tokens=30
    )
    a, b = keyed.new_session(), keyed.new_session()
    keyed.generate(first[0], session=a, max_new_tokens=5, do_sample=False)
    assert keyed.generate(first[1], session=b, max_new_tokens=5, do_sample=False) == _alone(
        model, first[1], 5
    )
    assert keyed.stats.reused_tokens == 7  # the shared system prefix of another session
    assert sum(len(e.ids) for e in keyed._cache.values()) <= 30 or len(keyed._cache) == 1  # the token budget
