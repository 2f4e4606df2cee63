"""The optional reasoning graph an agent may submit with its forecast (WorldReasoner's reasoning quality).

A small dated causal graph: ``{"events": [{"id", "date", "text"}], "links": [{"from", "to", "sign"}]}``.
Events are what the agent believes happened (a date ``YYYY-MM-DD`` and one sentence); links say
which event pushes which (``to`` may also be ``"outcome"``) up (``"+"``) or down (``"-"``). It is
never required and never scored as a forecast; evaluation measures its *key-event recall* against
the step's hindsight key events (:func:`forecast_dojo.evaluation.metrics.key_event_recall`).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any

from forecast_dojo.errors import UntrustedInputError

MAX_GRAPH_EVENTS = 20
MAX_GRAPH_LINKS = 40
MAX_GRAPH_TEXT_CHARS = 300
MAX_GRAPH_ID_CHARS = 40
OUTCOME_NODE = "outcome"
SIGNS = ("+", "-")


@dataclass(frozen=True)
class GraphEvent:
    """One dated event of a reasoning graph."""

    id: str
    date: str
    text: str


@dataclass(frozen=True)
class GraphLink:
    """A signed causal link between two events (``target`` may be :data:`OUTCOME_NODE`)."""

    source: str
    target: str
    sign: str


@dataclass(frozen=True)
class ReasoningGraph:
    """A parsed reasoning graph (see the module docstring)."""

    events: tuple[GraphEvent, ...]
    links: tuple[GraphLink, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON form (as the agent writes it)."""
        return {
            "events": [{"id": e.id, "date": e.date, "text": e.text} for e in self.events],
            "links": [{"from": k.source, "to": k.target, "sign": k.sign} for k in self.links],
        }


def _is_day(value: Any) -> bool:
    if not isinstance(value, str) or len(value) != 10:
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _text(value: Any, where: str, limit: int) -> str:
    if not isinstance(value, str) or not value.strip():
        raise UntrustedInputError(f"{where} must be a non-empty string")
    if len(value) > limit:
        raise UntrustedInputError(f"{where} is {len(value)} characters long; the cap is {limit}")
    return value.strip()


def parse_graph(value: Any) -> ReasoningGraph:
    """Read a graph as a model wrote it (anything JSON can hold).

    Args:
        value: The ``graph`` argument of ``submit_forecast``.

    Returns:
        The graph.

    Raises:
        UntrustedInputError: A malformed graph; the message says what to fix (it is shown to the agent).
    """
    if not isinstance(value, dict) or set(value) - {"events", "links"}:
        raise UntrustedInputError('graph must be an object {"events": [...], "links": [...]}')
    raw_events, raw_links = value.get("events", []), value.get("links", [])
    if not isinstance(raw_events, list) or not isinstance(raw_links, list):
        raise UntrustedInputError("graph events and links must be lists")
    if len(raw_events) > MAX_GRAPH_EVENTS or len(raw_links) > MAX_GRAPH_LINKS:
        raise UntrustedInputError(
            f"a graph holds at most {MAX_GRAPH_EVENTS} events and {MAX_GRAPH_LINKS} links"
        )
    events: list[GraphEvent] = []
    for i, item in enumerate(raw_events):
        if not isinstance(item, dict):
            raise UntrustedInputError(f'graph event {i} must be an object {{"id", "date", "text"}}')
        ident = _text(item.get("id"), f"graph event {i} id", MAX_GRAPH_ID_CHARS)
        day = item.get("date")
        if not _is_day(day):
            raise UntrustedInputError(f"graph event {i} date must be YYYY-MM-DD")
        events.append(
            GraphEvent(
                ident, str(day), _text(item.get("text"), f"graph event {i} text", MAX_GRAPH_TEXT_CHARS)
            )
        )
    ids = [e.id for e in events]
    if len(set(ids)) != len(ids) or OUTCOME_NODE in ids:
        raise UntrustedInputError(f"graph event ids must be distinct and not {OUTCOME_NODE!r}")
    links: list[GraphLink] = []
    for i, item in enumerate(raw_links):
        if not isinstance(item, dict) or item.get("sign") not in SIGNS:
            raise UntrustedInputError(f'graph link {i} must be {{"from", "to", "sign": "+" or "-"}}')
        source, target = item.get("from"), item.get("to")
        if source not in ids or (target not in ids and target != OUTCOME_NODE):
            raise UntrustedInputError(
                f"graph link {i} must join event ids of the graph (or 'to': {OUTCOME_NODE!r})"
            )
        links.append(GraphLink(str(source), str(target), str(item["sign"])))
    return ReasoningGraph(tuple(events), tuple(links))
