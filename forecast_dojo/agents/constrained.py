r"""Decoding that keeps a local model's evidence well-formed and its labels among the question's outcomes.

``submit_forecast(evidence=[[label, log likelihood ratio], ...])`` is refused whole when one label
is not an outcome (the env records the uniform forecast), and that is the one mistake fine-tuned
small models were seen to make (docs/training.md: a label naming the question's subject, or an
entity of a report about another question). :class:`EvidenceLabelsProcessor` is a Hugging Face
logits processor that, for each row of a batch with its own outcome labels, lets the model write
only tokens that keep the ``evidence`` array in the grammar ``submit_forecast`` reads: pieces
``[label, number]`` separated by commas (whitespace free between tokens), each label one of the
outcomes, each number a JSON number. Which outcomes a reply weighs, how strongly, its reasoning text
and its other arguments stay the model's own, and where the model's first choice already fits,
greedy decoding is unchanged.

How it reads a reply: the characters generated so far go through :class:`EvidenceLexer`, which waits
for ``<tool_call>``, then for the key ``"evidence"``, a colon and ``[``, and then follows the array.
A candidate token is allowed when feeding its text to a copy of the lexer keeps it in the grammar.
Candidates are tried in the model's order: greedy decoding keeps the first allowed one; sampling
keeps the allowed ones among the ``top_k`` most likely, and samples from those.

Labels are matched as they are written inside a JSON string, with or without ``\uXXXX`` escapes of
non-ASCII characters. A character that only a sequence of byte tokens can write (a token that does
not decode alone) cannot be written inside a label; if no token at all fits, the row is left
unconstrained for the rest of the turn (its call is then refused by the env as before). Only
``evidence`` is constrained: outcome labels given as keys of ``probabilities`` or ``log_odds`` are not.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from forecast_dojo.actions import TOOL_CALL_OPEN

EVIDENCE_KEY = '"evidence"'
WHITESPACE = frozenset(" \t\r\n")

# the lexer's phases, in the order a reply goes through them
_CALL, _KEY, _COLON, _OPEN, _ARRAY, _DONE = range(6)


def written_labels(outcomes: Sequence[str]) -> tuple[str, ...]:
    """Each outcome label as it may appear between the quotes of a JSON string (raw and ASCII-escaped)."""
    forms: list[str] = []
    for label in outcomes:
        for ascii_only in (False, True):
            form = json.dumps(label, ensure_ascii=ascii_only)[1:-1]
            if form not in forms:
                forms.append(form)
    return tuple(forms)


# inside the evidence array: what comes next
_ITEM_OR_END = "[ or ]"  # right after the array's "[": a piece, or the end (no evidence)
_ITEM = "["  # after a comma between pieces
_LABEL = '"'  # a piece's label opens
_IN_LABEL = "label"
_COMMA = ","  # between a piece's label and its strength
_NUMBER = "number"  # a piece's strength opens
_IN_NUMBER = "digits"
_PIECE_END = "]"  # after a piece's strength
_NEXT_OR_END = ", or ]"  # after a piece: another, or the end of the array

# a JSON number, and what can still become one
NUMBER = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
NUMBER_PREFIX = re.compile(r"-?(?:(?:0|[1-9]\d*)(?:\.|\.\d+(?:[eE][+-]?\d*)?|[eE][+-]?\d*)?)?")
NUMBER_CHARS = frozenset("0123456789.eE+-")

# (what comes next, character) -> what comes after it ("": the array is closed)
_MOVES = {
    (_ITEM_OR_END, "["): _LABEL,
    (_ITEM_OR_END, "]"): "",
    (_ITEM, "["): _LABEL,
    (_LABEL, '"'): _IN_LABEL,
    (_COMMA, ","): _NUMBER,
    (_PIECE_END, "]"): _NEXT_OR_END,
    (_NEXT_OR_END, ","): _ITEM,
    (_NEXT_OR_END, "]"): "",
}


@dataclass
class EvidenceLexer:
    """Where a reply stands in the JSON of its ``evidence`` argument, fed a piece of text at a time.

    :meth:`feed` is False as soon as the text leaves the evidence array's grammar: ``[`` pieces
    ``[label, number]`` separated by commas ``]``, whitespace anywhere between tokens, each label one
    of ``labels`` and each number a JSON number.

    Args:
        labels: the labels as written inside a JSON string (:func:`written_labels`).
    """

    labels: tuple[str, ...]
    phase: int = _CALL
    tail: str = ""  # before the array: the last characters, to find the call and the key
    expect: str = _ITEM_OR_END  # inside the array: what comes next
    written: str = ""  # the label or number being written
    escaped: bool = False  # in a label: the last character was a backslash

    @property
    def active(self) -> bool:
        """Whether the next tokens are constrained: the key ``"evidence"`` was written and its array is open."""
        return self.phase in (_COLON, _OPEN, _ARRAY)

    @property
    def done(self) -> bool:
        """Whether the evidence array was closed (or the row given up): nothing more is constrained."""
        return self.phase == _DONE

    def give_up(self) -> None:
        """Constrain nothing more in this reply."""
        self.phase = _DONE

    def copy(self) -> EvidenceLexer:
        """An independent copy (to try a candidate token)."""
        return replace(self)

    def feed(self, text: str) -> bool:
        """Advance over ``text``; False when it leaves the grammar (the lexer is then in no useful state)."""
        return all(self._step(char) for char in text)

    def _step(self, char: str) -> bool:
        if self.phase == _DONE:
            return True
        if self.phase in (_CALL, _KEY):
            wanted = TOOL_CALL_OPEN if self.phase == _CALL else EVIDENCE_KEY
            self.tail = (self.tail + char)[-len(wanted) :]
            if self.tail == wanted:
                self.phase, self.tail = self.phase + 1, ""
            return True
        if self.phase in (_COLON, _OPEN):
            if char in WHITESPACE:
                return True
            if self.phase == _COLON and char == ":":
                self.phase = _OPEN
            elif self.phase == _OPEN and char == "[":
                self.phase, self.expect = _ARRAY, _ITEM_OR_END
            else:  # "evidence" was some other string (e.g. a value): look for the key again
                self.phase, self.tail = _KEY, char
            return True
        return self._step_array(char)

    def _step_array(self, char: str) -> bool:
        expect = self.expect
        if expect == _IN_LABEL:
            if char == '"' and not self.escaped:
                self.expect = _COMMA
                return self.written in self.labels
            self.escaped = char == "\\" and not self.escaped
            self.written += char
            return any(label.startswith(self.written) for label in self.labels)
        if expect == _IN_NUMBER:
            if char in NUMBER_CHARS:
                self.written += char
                return NUMBER_PREFIX.fullmatch(self.written) is not None
            if NUMBER.fullmatch(self.written) is None:
                return False
            self.expect = _PIECE_END
        if char in WHITESPACE:
            return True
        if self.expect == _NUMBER and (char == "-" or char in "0123456789"):
            self.expect, self.written = _IN_NUMBER, char
            return True
        following = _MOVES.get((self.expect, char))
        if following is None:
            return False
        if following == "":
            self.phase = _DONE  # the array is closed
        elif following == _IN_LABEL:
            self.written, self.escaped = "", False
        self.expect = following or self.expect
        return True


def token_texts(tokenizer: Any) -> list[str]:
    """The text each token id adds when it follows other text (special tokens as written).

    Decoded after an anchor token and cut, so tokenizers that drop a token's leading space when it is
    decoded alone (SentencePiece) give the space. A token that is part of a multi-byte character
    decodes to U+FFFD, which matches no label.
    """
    anchor = tokenizer.encode("a", add_special_tokens=False)[-1]
    prefix = tokenizer.decode([anchor], skip_special_tokens=False, clean_up_tokenization_spaces=False)
    pairs = tokenizer.batch_decode(
        [[anchor, token] for token in range(len(tokenizer))],
        skip_special_tokens=False,
        clean_up_tokenization_spaces=False,
    )
    return [text[len(prefix) :] if text.startswith(prefix) else text for text in pairs]


class EvidenceLabelsProcessor:
    """A ``transformers`` logits processor: each row's evidence stays well-formed, its labels among its outcomes.

    Args:
        texts: :func:`token_texts` of the model's tokenizer.
        rows: per batch row, the outcome labels its evidence must name (None: the row is free).
        prompt_width: the width of the (padded) prompt; the tokens after it are the reply.
        greedy: decoding is greedy: only the model's first allowed choice is kept, and rows whose
            first choice is allowed are not touched.
        top_k: when sampling, the allowed tokens among this many most likely are kept.
    """

    def __init__(
        self,
        texts: Sequence[str],
        rows: Sequence[Sequence[str] | None],
        prompt_width: int,
        *,
        greedy: bool = True,
        top_k: int = 64,
    ) -> None:
        self.texts = texts
        self.lexers = [EvidenceLexer(written_labels(labels)) if labels else None for labels in rows]
        self.prompt_width = prompt_width
        self.greedy = greedy
        self.top_k = top_k
        self.fed = [0] * len(rows)  # reply tokens already fed to each row's lexer
        self.changed = [0] * len(rows)  # tokens chosen for each row other than the model's first choice

    def _text(self, token: int) -> str | None:
        """The token's text, or None where it cannot extend a label (unknown, empty)."""
        text = self.texts[token] if 0 <= token < len(self.texts) else ""
        return text or None

    def _allowed(self, lexer: EvidenceLexer, token: int) -> bool:
        text = self._text(token)
        return text is not None and lexer.copy().feed(text)

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        """Mask, in place, the scores of tokens that would take a row's evidence out of its grammar."""
        import torch

        for row, lexer in enumerate(self.lexers):
            if lexer is None or lexer.done:
                continue
            reply = input_ids[row, self.prompt_width + self.fed[row] :].tolist()
            self.fed[row] += len(reply)
            if not lexer.feed("".join(self._text(t) or "" for t in reply)):
                lexer.give_up()  # a token chosen outside the constraint broke a label: leave the row be
                continue
            if not lexer.active:
                continue
            first = int(scores[row].argmax())
            if self.greedy and self._allowed(lexer, first):
                continue
            order = torch.argsort(scores[row], descending=True)
            if self.greedy:
                keep = self._first_allowed(lexer, order)
            else:
                keep = [int(t) for t in order[: self.top_k] if self._allowed(lexer, int(t))]
                keep = keep or self._first_allowed(lexer, order[self.top_k :])
            if not keep:
                lexer.give_up()
                continue
            self.changed[row] += int(first not in keep)
            kept = scores[row, keep].clone()
            if not torch.isfinite(kept).any():  # another processor ruled them out: keep them, evenly
                kept = torch.zeros_like(kept)
            scores[row] = float("-inf")
            scores[row, keep] = kept
        return scores

    def _first_allowed(self, lexer: EvidenceLexer, order: Any) -> list[int]:
        for token in order.tolist():
            if self._allowed(lexer, token):
                return [token]
        return []
