"""Polymarket importer: events and markets from the public Gamma API plus CLOB price histories.

Nothing here fetches anything; it reads an export folder a user downloaded::

    root/events/*.json           Gamma event objects (a file holds one object or a list of them);
                                 each event holds its ``markets``
    root/markets/*.json          optional stand-alone Gamma market objects (or lists of them)
    root/prices-history/<token>.json   CLOB ``prices-history`` answer for one outcome token listed in
                                 a market's ``clobTokenIds``: {"history": [{"t": unix_s, "p": price}]}

Gamma encodes ``outcomes``, ``outcomePrices`` and ``clobTokenIds`` as JSON strings; real lists are
accepted too. A market's winner is the outcome whose final ``outcomePrices`` entry is at least
``WINNER_MIN_PRICE`` while every other one is at most ``1 - WINNER_MIN_PRICE``.

* A market outside a negRisk event becomes one event (usually binary) named ``polymarket:<market id>``;
  its belief at each history instant is the forward-filled price of each outcome token, normalized
  (one token's history alone gives ``(p, 1 - p)``).
* A negRisk event (mutually exclusive markets, ``negRisk: true``) becomes one K-outcome event named
  ``polymarket:event:<event id>`` whose outcome labels are the markets' ``groupItemTitle`` and whose
  belief is the markets' forward-filled YES prices normalized to sum to one. Placeholder markets
  (no prices, no history) are dropped from K.

``extra["trade_days"]`` lists the UTC days on which the raw prices were coherent (present and summing
to within ``COHERENCE_TOLERANCE`` of one before normalization); selection's faithfulness filter uses it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

from forecast_dojo.errors import InputNotFoundError
from forecast_dojo.errors import PolymarketError as PolymarketError
from forecast_dojo.events.result import ImportResult
from forecast_dojo.events.texts import clean_text, strip_notes
from forecast_dojo.schema import Event, MarketPoint, decode_json_text
from forecast_dojo.timeutil import InstantError, iso, parse_instant

WINNER_MIN_PRICE = 0.99
COHERENCE_TOLERANCE = 0.1


def undated_text(value: object) -> str:
    """A description as it may be shown at any cutoff.

    An export holds the text as downloaded, after the close, so every appended note ("Update: ...",
    dated or not) is removed, as are source leftovers.
    """
    return strip_notes(clean_text(str(value or "").strip()), None)[0]


def _iter_json_objects(folder: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    if not folder.is_dir():
        return
    for path in sorted(folder.glob("*.json")):
        try:
            payload = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as err:
            raise PolymarketError(f"{path}: not valid JSON ({err})") from err
        items = payload if isinstance(payload, list) else [payload]
        for i, item in enumerate(items):
            if not isinstance(item, dict):
                raise PolymarketError(f"{path}[{i}]: expected a JSON object, got {type(item).__name__}")
            yield f"{path.name}[{i}]", item


def decode_list(value: object, *, where: str) -> list[Any] | None:
    """A Gamma list field that may arrive JSON-encoded as a string; None when absent or empty."""
    if value is None or value == "":
        return None
    text = value
    value = decode_json_text(
        value, lambda _: PolymarketError(f"{where}: not a JSON list: {str(text)[:80]!r}")
    )
    if not isinstance(value, list):
        raise PolymarketError(f"{where}: expected a list, got {type(value).__name__}")
    return value or None


def _float_or_none(value: object) -> float | None:
    if value is None or isinstance(value, bool):
        return None
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return number if 0.0 <= number <= 1.0 else None


def _instant(value: object) -> datetime | None:
    if value in (None, ""):
        return None
    try:
        return parse_instant(value)
    except InstantError:
        return None


def load_price_history(path: Path) -> list[tuple[datetime, float]]:
    """One token's ``prices-history`` file as ordered (instant, price); invalid points are dropped."""
    try:
        payload = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise PolymarketError(f"{path}: not valid JSON ({err})") from err
    history = payload.get("history") if isinstance(payload, dict) else None
    if not isinstance(history, list):
        raise PolymarketError(f"{path}: expected {{'history': [...]}}")
    points: dict[datetime, float] = {}
    for i, point in enumerate(history):
        if not isinstance(point, dict) or "t" not in point or "p" not in point:
            raise PolymarketError(f"{path}: history[{i}] lacks 't' or 'p'")
        price = _float_or_none(point["p"])
        if price is None or isinstance(point["t"], bool) or not isinstance(point["t"], (int, float)):
            continue
        points[parse_instant(point["t"])] = price
    return sorted(points.items())


def _winner(prices: list[float | None]) -> int | None | str:
    """Index of the resolved winner; ``"tie"`` or None (no winner) otherwise."""
    if any(p is None for p in prices):
        return None
    winners = [i for i, p in enumerate(prices) if p is not None and p >= WINNER_MIN_PRICE]
    losers = [i for i, p in enumerate(prices) if p is not None and p <= 1.0 - WINNER_MIN_PRICE]
    if len(winners) == 1 and len(losers) == len(prices) - 1:
        return winners[0]
    if len(set(prices)) == 1:
        return "tie"
    return None


def _aligned_series(histories: list[list[tuple[datetime, float]]]) -> list[tuple[datetime, list[float]]]:
    """Forward-fill several histories onto their union of instants, from when all of them have a value."""
    times = sorted({t for history in histories for t, _ in history})
    cursors = [0] * len(histories)
    current: list[float | None] = [None] * len(histories)
    aligned = []
    for t in times:
        for k, history in enumerate(histories):
            while cursors[k] < len(history) and history[cursors[k]][0] <= t:
                current[k] = history[cursors[k]][1]
                cursors[k] += 1
        if all(v is not None for v in current):
            aligned.append((t, [float(v) for v in current if v is not None]))
    return aligned


def _belief_series(
    raw: list[tuple[datetime, list[float]]], close_at: datetime, complement: bool
) -> tuple[list[MarketPoint], list[str]]:
    """Normalized market points up to the close, and the UTC days with coherent raw prices."""
    points: list[MarketPoint] = []
    coherent_days: set[str] = set()
    for at, values in raw:
        if at > close_at:
            break
        if complement:
            values = [values[0], 1.0 - values[0]]
        total = sum(values)
        if total <= 0:
            continue
        if abs(total - 1.0) <= COHERENCE_TOLERANCE:
            coherent_days.add(at.date().isoformat())
        points.append(MarketPoint(at, tuple(v / total for v in values)))
    return points, sorted(coherent_days)


class _Export:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.prices_dir = root / "prices-history"
        self._cache: dict[str, list[tuple[datetime, float]] | None] = {}

    def history(self, token: str) -> list[tuple[datetime, float]] | None:
        if token not in self._cache:
            path = self.prices_dir / f"{token}.json"
            self._cache[token] = load_price_history(path) if path.exists() else None
        return self._cache[token]


def load_polymarket(root: str | Path, *, progress: bool = True) -> ImportResult:
    """Import resolved markets and negRisk events from an export folder; skips are counted by reason.

    Reasons: ``not_closed``, ``missing_prices`` (no final ``outcomePrices``), ``no_winner``, ``tie``,
    ``multiple_winners`` (negRisk), ``bad_dates``, ``bad_outcomes``, ``duplicate_market``.
    """
    from tqdm.auto import tqdm

    root = Path(root)
    if not (root / "events").is_dir() and not (root / "markets").is_dir():
        raise InputNotFoundError(
            f"{root}: a Polymarket export needs events/ or markets/ (see forecast_dojo.events.polymarket)"
        )
    export = _Export(root)
    result = ImportResult(source="polymarket")
    seen_markets: set[str] = set()
    items = [("event", where, obj) for where, obj in _iter_json_objects(root / "events")]
    items += [("market", where, obj) for where, obj in _iter_json_objects(root / "markets")]
    for kind, where, obj in tqdm(items, desc="polymarket", disable=not progress):
        if kind == "market":
            markets, event = [obj], {}
        else:
            markets = obj.get("markets")
            if not isinstance(markets, list):
                raise PolymarketError(f"{where}: event {obj.get('id')!r} has no 'markets' list")
            event = obj
        fresh = []
        for market in markets:
            market_id = str(market.get("id") or market.get("conditionId") or "")
            if not market_id:
                raise PolymarketError(f"{where}: a market without 'id' or 'conditionId'")
            if market_id in seen_markets:
                result.skip("duplicate_market", market_id)
                continue
            seen_markets.add(market_id)
            fresh.append(market)
        if event and bool(event.get("negRisk")) and len(fresh) > 1:
            made = _negrisk_event(event, fresh, export, result, where)
            if made is not None:
                result.events.append(made)
        else:
            for market in fresh:
                made = _binary_event(market, event, export, result, where)
                if made is not None:
                    result.events.append(made)
    result.events.sort(key=lambda e: (e.close_at, e.id))
    return result


def _dates(
    objects: list[dict[str, Any]], fallback: dict[str, Any]
) -> tuple[datetime, datetime, datetime] | None:
    starts = [
        s for s in (_instant(o.get("startDate") or o.get("createdAt")) for o in objects) if s is not None
    ]
    starts = starts or [s for s in [_instant(fallback.get("startDate"))] if s]
    ends = [e for e in (_instant(o.get("endDate")) for o in objects) if e is not None]
    ends = ends or [e for e in [_instant(fallback.get("endDate"))] if e]
    closed = [c for c in (_instant(o.get("closedTime")) for o in objects) if c is not None]
    if not starts or not (ends or closed):
        return None
    open_at = min(starts)
    last_close = max(closed) if closed else None
    end = max(ends) if ends else None
    close_at = min(x for x in (end, last_close) if x is not None)
    resolved_at = max(x for x in (end, last_close) if x is not None)
    if open_at > close_at:
        return None
    return open_at, close_at, resolved_at


def _deadline(objects: list[dict[str, Any]], fallback: dict[str, Any], close_at: datetime) -> datetime:
    """The stated deadline (latest ``endDate``), never before the close: the schedule's horizon."""
    ends = [e for e in (_instant(o.get("endDate")) for o in objects) if e is not None]
    ends = ends or [e for e in [_instant(fallback.get("endDate"))] if e]
    return max([close_at, *ends])


def _tags(event: dict[str, Any]) -> tuple[str, ...]:
    tags = event.get("tags") or []
    labels = [str(t.get("label")) for t in tags if isinstance(t, dict) and t.get("label")]
    return ("polymarket", *labels)


def _binary_event(
    market: dict[str, Any], event: dict[str, Any], export: _Export, result: ImportResult, where: str
) -> Event | None:
    market_id = str(market.get("id") or market.get("conditionId"))
    here = f"{where} market {market_id}"
    if not market.get("closed"):
        result.skip("not_closed", market_id)
        return None
    outcomes = decode_list(market.get("outcomes"), where=f"{here} outcomes")
    if not outcomes or len(outcomes) < 2 or len({str(o) for o in outcomes}) != len(outcomes):
        result.skip("bad_outcomes", market_id)
        return None
    prices_raw = decode_list(market.get("outcomePrices"), where=f"{here} outcomePrices")
    if not prices_raw or len(prices_raw) != len(outcomes):
        result.skip("missing_prices", market_id)
        return None
    winner = _winner([_float_or_none(p) for p in prices_raw])
    if winner == "tie":
        result.skip("tie", market_id)
        return None
    if winner is None:
        result.skip("no_winner", market_id)
        return None
    dates = _dates([market], event)
    if dates is None:
        result.skip("bad_dates", market_id)
        return None
    open_at, close_at, resolved_at = dates
    tokens = decode_list(market.get("clobTokenIds"), where=f"{here} clobTokenIds") or []
    histories = [export.history(str(t)) for t in tokens[: len(outcomes)]]
    present = [h for h in histories if h]
    points: list[MarketPoint] = []
    trade_days: list[str] = []
    if len(present) == len(outcomes):
        points, trade_days = _belief_series(_aligned_series(present), close_at, complement=False)
    elif len(outcomes) == 2 and present:
        index = next(k for k, h in enumerate(histories) if h)
        raw = [(t, [p]) for t, p in present[0]]
        points, trade_days = _belief_series(raw, close_at, complement=True)
        if index == 1:
            points = [MarketPoint(p.at, tuple(reversed(p.probabilities))) for p in points]
    else:
        result.note("no_price_history")
    labels = tuple(str(o) for o in outcomes)
    return _event(
        ("market", market_id),
        market,
        event,
        (open_at, close_at, resolved_at),
        (points, trade_days),
        question=str(market.get("question") or event.get("title") or "").strip(),
        outcomes=labels,
        outcome=labels[int(winner)],
        background=undated_text(event.get("description")) if event else "",
        deadline_at=iso(_deadline([market], event, close_at)),
    )


def _event(
    kind: tuple[str, str],
    item: dict[str, Any],
    event: dict[str, Any],
    dates: tuple[datetime, datetime, datetime],
    series: tuple[list[MarketPoint], list[str]],
    *,
    question: str,
    outcomes: tuple[str, ...],
    outcome: str,
    background: str,
    **extra: Any,
) -> Event:
    """The event of a binary market or a neg-risk event (``kind``: ``("market" | "event", its id)``).

    ``item`` is the market or event whose description is the resolution criteria and whose slug is
    the URL; ``series`` the price points and their trade days; ``extra`` more ``Event.extra`` fields.
    """
    what, source_id = kind
    open_at, close_at, resolved_at = dates
    points, trade_days = series
    slug = item.get("slug")
    return Event(
        id=f"polymarket:{source_id}" if what == "market" else f"polymarket:event:{source_id}",
        question=question,
        outcomes=outcomes,
        outcome=outcome,
        open_at=open_at,
        close_at=close_at,
        resolved_at=resolved_at,
        cutoffs=(open_at,),
        background=background,
        resolution_criteria=undated_text(item.get("description")),
        source="polymarket",
        url=f"https://polymarket.com/{what}/{slug}" if slug else None,
        tags=_tags(event),
        market=tuple(points),
        extra={
            "source_id": source_id,
            "market_granularity": "trades" if points else "none",
            "trade_days": trade_days,
            **{k: v for k, v in extra.items() if k != "deadline_at"},
            "recorded_close_at": iso(close_at),
            "deadline_at": extra["deadline_at"],
        },
    )


def _negrisk_event(
    event: dict[str, Any], markets: list[dict[str, Any]], export: _Export, result: ImportResult, where: str
) -> Event | None:
    event_id = str(event.get("id"))
    here = f"{where} event {event_id}"
    members: list[tuple[str, float | None, list[tuple[datetime, float]] | None, dict[str, Any]]] = []
    for market in markets:
        market_id = str(market.get("id") or market.get("conditionId"))
        outcomes = [
            str(o)
            for o in decode_list(market.get("outcomes"), where=f"{here} market {market_id} outcomes") or []
        ]
        if len(outcomes) != 2 or "Yes" not in outcomes:
            result.skip("bad_outcomes", event_id)
            return None
        yes = outcomes.index("Yes")
        prices = decode_list(market.get("outcomePrices"), where=f"{here} market {market_id} outcomePrices")
        tokens = (
            decode_list(market.get("clobTokenIds"), where=f"{here} market {market_id} clobTokenIds") or []
        )
        history = export.history(str(tokens[yes])) if len(tokens) > yes else None
        if not prices and not history:
            result.note("placeholder_markets_dropped")
            continue
        if not market.get("closed"):
            result.skip("not_closed", event_id)
            return None
        yes_price = _float_or_none(prices[yes]) if prices and len(prices) == 2 else None
        label = str(market.get("groupItemTitle") or market.get("question") or market_id).strip()
        members.append((label, yes_price, history, market))
    if len(members) < 2:
        result.skip("bad_outcomes", event_id)
        return None
    labels = tuple(m[0] for m in members)
    if len(set(labels)) != len(labels):
        result.skip("bad_outcomes", event_id)
        return None
    yes_prices = [m[1] for m in members]
    if any(p is None for p in yes_prices):
        result.skip("missing_prices", event_id)
        return None
    winners = [k for k, p in enumerate(yes_prices) if p is not None and p >= WINNER_MIN_PRICE]
    undecided = [
        k for k, p in enumerate(yes_prices) if p is not None and 1.0 - WINNER_MIN_PRICE < p < WINNER_MIN_PRICE
    ]
    if len(winners) > 1:
        result.skip("multiple_winners", event_id)
        return None
    if undecided:
        result.skip(
            "tie" if len({yes_prices[k] for k in undecided}) == 1 and len(undecided) > 1 else "no_winner",
            event_id,
        )
        return None
    if not winners:
        result.skip("no_winner", event_id)
        return None
    dates = _dates([m[3] for m in members], event)
    if dates is None:
        result.skip("bad_dates", event_id)
        return None
    open_at, close_at, resolved_at = dates
    histories = [m[2] for m in members]
    points: list[MarketPoint] = []
    trade_days: list[str] = []
    if all(histories):
        points, trade_days = _belief_series(
            _aligned_series([h for h in histories if h]), close_at, complement=False
        )
    else:
        result.note("no_price_history")
    return _event(
        ("event", event_id),
        event,
        event,
        (open_at, close_at, resolved_at),
        (points, trade_days),
        question=str(event.get("title") or "").strip(),
        outcomes=labels,
        outcome=labels[winners[0]],
        background="",
        neg_risk_markets=[str(m[3].get("id")) for m in members],
        deadline_at=iso(_deadline([m[3] for m in members], event, close_at)),
    )
