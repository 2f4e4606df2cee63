"""Constrained decoding of evidence labels: the lexer, the logits processor, and an agent through the env."""

from __future__ import annotations

import json

import pytest

from forecast_dojo.agents.constrained import (
    EvidenceLabelsProcessor,
    EvidenceLexer,
    token_texts,
    written_labels,
)
from tests.conftest import require_smollm2, tiny_llama

OUTCOMES = ("Mira Tolvanen", "Jonas Berg", "Ada Quist")
CALL = '<tool_call>{"name": "submit_forecast", "arguments": {"evidence": [['


def _lexer(outcomes=OUTCOMES) -> EvidenceLexer:
    return EvidenceLexer(written_labels(outcomes))


def test_written_labels_cover_raw_and_escaped_forms():
    assert written_labels(["Yes", 'The "Act"', "Zoë"]) == ("Yes", 'The \\"Act\\"', "Zoë", "Zo\\u00eb")


@pytest.mark.parametrize(
    "text",
    [
        CALL + '"Mira Tolvanen", 1], ["Ada Quist", -0.5]]}}</tool_call>',
        CALL + ' "Jonas Berg" , 2]]}}',
        '<tool_call>{"name": "submit_forecast", "arguments": {"evidence" : [ ["Ada',  # a label being written
        'The "evidence" says: Thasbran Dynamics <tool_call>{"name": "search", "arguments": {"query": "x"}}',
        '<tool_call>{"name": "submit_forecast", "arguments": {"rationale": "evidence", "evidence": [["Ada Quist", 1]]}}',
        '<tool_call>{"name": "submit_forecast", "arguments": {"evidence": [], "x": [["Thasbran", 1]]}}',
        CALL + '"Ada Quist", -1.5e-2 ], ["Ada Quist",0]]',
        'no call at all: [["Thasbran", 1]]',
    ],
)
def test_lexer_accepts_replies_whose_labels_are_outcomes(text):
    assert _lexer().feed(text)


@pytest.mark.parametrize(
    "text",
    [
        CALL + '"Thasbran Dynamics", 1]]}}',
        CALL + '"Mira Tolvanen", 1], ["Mira", 1]]}}',  # a prefix of an outcome, closed
        CALL + '"Mira Tolvanen ',  # one character past the label
        CALL + "1, 2]]}}",  # a piece that does not start with its label
        CALL + '"Ada Quist", 1], [Jonas',
        CALL + '"Ada Quist"\', 1]]',  # anything but a comma after the label
        CALL + '"Ada Quist", "strong"]]',  # the env reads only JSON numbers
        CALL + '"Ada Quist", 01]]',
        CALL + '"Ada Quist", 1.]]',
        CALL + '"Ada Quist", 1, 2]]',
        CALL + '"Ada Quist", 1] ["Ada Quist", 1]]',
    ],
)
def test_lexer_refuses_a_label_that_is_no_outcome(text):
    assert not _lexer().feed(text)


def test_lexer_is_done_after_the_evidence_array_and_active_only_inside_it():
    lexer = _lexer()
    assert lexer.feed('Reasoning. <tool_call>{"name": "submit_forecast", "arguments": {"evid')
    assert not lexer.active
    assert lexer.feed('ence": ')
    assert lexer.active
    assert lexer.feed('[["Ada Quist", 1]]')
    assert lexer.done and not lexer.active
    assert lexer.feed(', "rationale": "Thasbran"}}</tool_call>')


llm = require_smollm2()
torch = pytest.importorskip("torch")


@pytest.fixture(scope="module")
def tokenizer():
    return llm.load_smollm2_tokenizer()


@pytest.fixture(scope="module")
def texts(tokenizer):
    return token_texts(tokenizer)


def test_token_texts_concatenate_to_the_decoded_text(tokenizer, texts):
    text = CALL + '"Mira Tolvanen", 1.5]]}}</tool_call><|im_end|>'
    ids = tokenizer.encode(text, add_special_tokens=False)
    assert "".join(texts[i] for i in ids) == text


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("greedy", [True, False])
def test_noisy_scores_set_on_a_wrong_label_still_give_an_outcome(tokenizer, texts, seed, greedy):
    """Scores that pull hard toward a non-outcome label (plus noise) give a whole outcome label, rest intact."""
    generator = torch.Generator().manual_seed(seed)
    prompt = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    steer = _Steer(tokenizer, CALL, "Thasbran Dynamics", ", 1.5]]}}</tool_call>")
    steer.width = len(prompt)
    processor = EvidenceLabelsProcessor(texts, [OUTCOMES], len(prompt), greedy=greedy)
    reply: list[int] = []
    stop = tokenizer.convert_tokens_to_ids("<|im_end|>")
    for _ in range(80):
        ids = torch.tensor([prompt + reply])
        scores = steer(ids, torch.randn((1, len(texts)), generator=generator))
        scores = processor(ids, scores)
        if greedy:
            token = int(scores[0].argmax())
        else:
            token = int(torch.multinomial(torch.softmax(scores[0], -1), 1, generator=generator))
        if token == stop:
            break
        reply.append(token)
    written = tokenizer.decode(reply, skip_special_tokens=False)
    call = json.loads(written.removeprefix("<tool_call>").removesuffix("</tool_call>"))
    [[label, strength]] = call["arguments"]["evidence"]
    assert label in OUTCOMES and strength == 1.5, written
    assert processor.changed[0] > 0


def test_rows_without_labels_and_greedy_first_choices_that_fit_are_untouched(tokenizer, texts):
    prompt = tokenizer.encode("<|im_start|>assistant\n", add_special_tokens=False)
    reply = tokenizer.encode(CALL + '"Ada', add_special_tokens=False)
    processor = EvidenceLabelsProcessor(texts, [OUTCOMES, None], len(prompt))
    scores = torch.randn((2, len(texts)), generator=torch.Generator().manual_seed(0))
    good = tokenizer.encode(" Quist", add_special_tokens=False)[0]
    scores[:, good] += 30.0
    before = scores.clone()
    after = processor(torch.tensor([prompt + reply] * 2), scores)
    assert torch.equal(after, before) and processor.changed == [0, 0]


class _Steer:
    """A logits processor playing a model that writes ``reply`` but for its evidence label, then resumes it.

    While the reply so far is a prefix of ``before + bad_label``, it pushes the next token of that text;
    once a label was closed (whatever it was), it pushes the rest of ``after``.
    """

    def __init__(self, tokenizer, before: str, bad_label: str, after: str) -> None:
        self.tokenizer, self.before, self.bad_label, self.after = tokenizer, before, bad_label, after
        self.width: int | None = None

    def _wanted(self, text: str) -> str:
        if not text.startswith(self.before):
            return self.before[len(text) :] if self.before.startswith(text) else ""
        rest = text[len(self.before) :]
        if rest.count('"') >= 2:  # the label was closed: resume after it
            done = rest[rest.index('"', 1) + 1 :]
            return self.after[len(done) :] if self.after.startswith(done) else ""
        return ('"' + self.bad_label + '"' + self.after)[len(rest) :]

    def __call__(self, input_ids, scores):
        if self.width is None:
            self.width = input_ids.shape[1]
        for row in range(input_ids.shape[0]):
            text = self.tokenizer.decode(input_ids[row, self.width :].tolist(), skip_special_tokens=False)
            wanted = self._wanted(text)
            token = self.tokenizer.encode(wanted, add_special_tokens=False)[0] if wanted else None
            if token is None:
                token = self.tokenizer.convert_tokens_to_ids("<|im_end|>")
            scores[row, token] += 100.0
        return scores


def _steered_llama(tokenizer):
    """A tiny random Llama whose every reply is a ``submit_forecast`` call naming ``Thasbran Dynamics``."""
    from transformers import LogitsProcessorList

    steer = _Steer(
        tokenizer,
        '<tool_call>{"name": "submit_forecast", "arguments": {"evidence": [[',
        "Thasbran Dynamics",
        ", 2.0]]}}</tool_call>",
    )

    class SteeredLlama(type(tiny_llama(len(tokenizer), pad_token_id=None))):  # type: ignore[misc]
        def generate(self, *args, logits_processor=None, **kwargs):
            processors = LogitsProcessorList([steer, *(logits_processor or [])])
            steer.width = None
            return super().generate(*args, logits_processor=processors, **kwargs)

    model = tiny_llama(len(tokenizer), pad_token_id=None).eval()
    model.__class__ = SteeredLlama
    return model


@pytest.mark.parametrize("constrain", [False, True])
def test_an_agent_with_constrained_labels_submits_a_valid_forecast(make_tiny_env, tokenizer, constrain):
    """Through the env: a model set on a non-outcome label is refused, unless its labels are constrained."""
    from forecast_dojo.agents.llm import TransformersAgent
    from forecast_dojo.prompts import Budgets

    model = _steered_llama(tokenizer)
    env = make_tiny_env(budgets=Budgets(max_tool_calls=2, max_turns=2))
    agent = TransformersAgent(model, tokenizer, max_new_tokens=40, constrain_labels=constrain)
    observation, _ = env.reset("mayor")
    action = agent.act(observation)
    _, _, _, _, info = env.step(action)
    env.close()
    call = json.loads(action["content"].split("<tool_call>")[1].split("</tool_call>")[0])
    label = call["arguments"]["evidence"][0][0]
    tokens = info["record"].tokens
    if constrain:
        assert label in OUTCOMES and call["arguments"]["evidence"][0][1] == 2.0
        assert agent.batcher.stats.constrained_tokens > 0
        assert info["valid"] and not info["record"].forecast_error
        # the step record says how many of the step's tokens the constraint chose, and they were counted
        assert tokens["constrained_tokens"] == action["usage"]["constrained_tokens"]
        assert 0 < tokens["constrained_tokens"] <= tokens["completion_tokens"]
        assert tokens["constrained_tokens"] == agent.batcher.stats.constrained_tokens  # the one turn
    else:
        assert label == "Thasbran Dynamics"
        assert agent.batcher.stats.constrained_tokens == 0
        assert not info["valid"] and "Thasbran Dynamics" in info["record"].forecast_error
        assert "constrained_tokens" not in tokens  # a plain agent's records are as before


def test_each_request_gets_its_own_count_of_constrained_tokens(tokenizer):
    """Two rows of one batch: the steered row's reply was corrected, the free row's count is 0."""
    import threading

    from forecast_dojo.agents.llm import generation_batcher

    model = _steered_llama(tokenizer)
    batcher = generation_batcher(model, tokenizer, max_batch=2, wait_s=5.0, start_wait_s=0.0)
    prompt = tokenizer("<|im_start|>user\nWill it rain?<|im_end|>\n<|im_start|>assistant\n")["input_ids"]
    turns = {}

    def ask(name, labels):
        turns[name] = batcher.generate_turn(prompt, labels=labels, max_new_tokens=40, do_sample=False)

    threads = [
        threading.Thread(target=ask, args=("free", None)),
        threading.Thread(target=ask, args=("kept", OUTCOMES)),
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert batcher.stats.batch_sizes == [2]  # one batch held both rows
    assert turns["free"].constrained_tokens == 0
    assert "Thasbran Dynamics" in tokenizer.decode(turns["free"].tokens)
    assert turns["kept"].constrained_tokens > 0
    assert turns["kept"].constrained_tokens == batcher.stats.constrained_tokens
    assert batcher.generate(prompt, max_new_tokens=40, do_sample=False) == turns["free"].tokens
