"""``forecast-dojo events generate``: questions written from the corpus itself (FABench's renewing benchmark).

From dated document clusters, an OpenAI-compatible model proposes questions with resolution
criteria, a resolution date and the documents that support them; a second pass resolves each
question from documents dated **after** its resolution date only. The proposals that survive the
generator's own checks become ordinary events, which then go through the same selection, schedule,
leakage screen and temporal split as imported ones (:func:`forecast_dojo.events.build.build_events`)
and are written the same way (``train.jsonl``, ``eval.jsonl``, ``all.jsonl``, ``decisions.jsonl``,
``report.json``, ``report.md``), next to ``generate.json`` / ``generate.md`` (what was proposed, kept
and dropped, and why).

Pipeline, all deterministic given the model's replies:

1. **Clusters.** Documents available in ``[start, end]`` are cut into windows of ``window_days``;
   inside a window a document joins the first cluster whose name terms it shares (at least
   ``min_shared`` salient terms and one name, :mod:`forecast_dojo.events.relevance`), else opens one.
   Clusters with at least ``min_cluster_docs`` documents are kept (the largest ``max_clusters_per_window``).
2. **Proposal.** The model sees the cluster's documents (id, date, title, snippet) and the date the
   question is asked (the day after the cluster's last document) and answers JSON
   ``{"questions": [{"question", "outcomes", "resolution_criteria", "resolution_date", "background",
   "supporting_doc_ids"}]}``. Binary questions use ``["Yes", "No"]``; multiple choice lists 3-6 labels.
3. **Checks.** A proposal is dropped, with its reason, when it is malformed, resolves before it is
   asked or after ``end + resolve_days``, cites documents that are not in its cluster, or names an
   outcome label (other than Yes/No) in its question (**answer in question**).
4. **Resolution.** Documents available in ``(resolution date, resolution date + resolve_days]``
   that match the question are shown to the model, which answers ``{"outcome": label or "unknown",
   "doc_ids": [...]}``. Unknown, an unlisted label, or citing no shown document drops the question.
   A question whose resolving documents were already available when it was asked is dropped
   (**answer before open**).
5. **Events.** One cutoff at the ask date (like an imported event's open), close at the end of the
   resolution date, resolved when the first cited resolving document became available; then the
   events build.

Every request and reply goes through :class:`ReplyCache`: ``llm-cache/<sha256>.json`` keyed by the
model and the exact messages, and one line per request in ``llm-log.jsonl`` (cache hit or not), so
a rerun with the same inputs sends nothing to the server and is auditable.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import Any

from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import ConfigError, DataError
from forecast_dojo.events.relevance import RelevanceIndex, name_terms, salient_terms, terms
from forecast_dojo.events.result import ImportResult
from forecast_dojo.schema import Event, SchemaError
from forecast_dojo.timeutil import UTC, end_of_day, from_micros, iso, to_micros

GENERATED_SOURCE = "generated"
GENERATE_FILES = ("generate.json", "generate.md", "llm-log.jsonl")
SNIPPET_CHARS = 400
BINARY = ("Yes", "No")

Completion = Callable[[list[dict[str, str]]], str]  # chat messages -> the reply's text

PROPOSE_SYSTEM = (
    "You write forecasting questions from news. Reply with JSON only, no prose: "
    '{"questions": [{"question": str, "outcomes": [str, ...], "resolution_criteria": str, '
    '"resolution_date": "YYYY-MM-DD", "background": str, "supporting_doc_ids": [str, ...]}]}. '
    'A binary question has outcomes ["Yes", "No"]; a multiple-choice one lists 3 to 6 short labels. '
    "Each question must be about something still unknown on the date it is asked, resolvable from news "
    "published after its resolution date, and must not state or hint at its answer."
)
RESOLVE_SYSTEM = (
    "You resolve a forecasting question from news published after its resolution date. Reply with JSON "
    'only: {"outcome": one of the listed outcomes or "unknown", "doc_ids": [ids of the documents that '
    'settle it]}. Say "unknown" unless the documents settle the question.'
)


@dataclass(frozen=True)
class GenerateConfig:
    """What the generator does (see the module docstring for each step).

    Attributes:
        start: First day of documents to cluster (inclusive).
        end: Last day (inclusive).
        window_days: Days per clustering window.
        min_cluster_docs: Documents a cluster needs.
        max_cluster_docs: Documents shown to the model per cluster (earliest first).
        max_clusters_per_window: Clusters kept per window (largest first).
        min_shared: Salient terms a document must share with a cluster.
        questions_per_cluster: How many questions the prompt asks for.
        resolve_days: How long after the resolution date the resolving documents may appear.
        max_resolve_docs: Documents shown to the resolution pass.
        min_resolution_coverage: Share of the question's salient terms a resolving document must hold.
    """

    start: date
    end: date
    window_days: int = 7
    min_cluster_docs: int = 3
    max_cluster_docs: int = 8
    max_clusters_per_window: int = 3
    min_shared: int = 2
    questions_per_cluster: int = 2
    resolve_days: int = 30
    max_resolve_docs: int = 12
    min_resolution_coverage: float = 0.5

    def __post_init__(self) -> None:
        if self.start > self.end:
            raise ConfigError(f"--start {self.start} is after --end {self.end}")
        for name in ("window_days", "min_cluster_docs", "max_cluster_docs", "max_clusters_per_window"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.resolve_days < 1:
            raise ConfigError(f"resolve_days must be >= 1, got {self.resolve_days}")


class ReplyCache:
    """Every prompt and reply of a generation, cached by content and logged (a rerun is free and auditable).

    Args:
        folder: Where ``llm-cache/`` and ``llm-log.jsonl`` live.
        model: The model name (part of the key).
        complete: Sends messages to the model and returns the reply text (called on a cache miss only).
    """

    def __init__(self, folder: str | Path, model: str, complete: Completion | None) -> None:
        self.folder = Path(folder)
        self.model = model
        self.complete = complete
        (self.folder / "llm-cache").mkdir(parents=True, exist_ok=True)
        self.log_path = self.folder / "llm-log.jsonl"
        self.hits = 0
        self.misses = 0

    def key(self, messages: list[dict[str, str]]) -> str:
        """The cache key of a request: sha256 of the model and the exact messages."""
        text = json.dumps({"model": self.model, "messages": messages}, sort_keys=True, ensure_ascii=False)
        return hashlib.sha256(text.encode()).hexdigest()

    def ask(self, purpose: str, messages: list[dict[str, str]]) -> str:
        """The reply to ``messages`` (from the cache when seen before); logs the request.

        Raises:
            ConfigError: A cache miss with no model to ask (``complete`` is None).
        """
        key = self.key(messages)
        path = self.folder / "llm-cache" / f"{key}.json"
        hit = path.is_file()
        if hit:
            reply = json.loads(path.read_text())["reply"]
            self.hits += 1
        else:
            if self.complete is None:
                raise ConfigError(f"no cached reply for a {purpose} request and no model to ask")
            reply = self.complete(messages)
            path.write_text(
                json.dumps({"model": self.model, "messages": messages, "reply": reply}, ensure_ascii=False)
            )
            self.misses += 1
        with self.log_path.open("a", encoding="utf-8") as fh:
            fh.write(json.dumps({"purpose": purpose, "key": key, "cached": hit, "model": self.model}) + "\n")
        return reply


def openai_completion(
    base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 120.0
) -> Completion:
    """A :data:`Completion` over an OpenAI-compatible server (temperature 0, JSON replies asked for in the prompt).

    Args:
        base_url: The server's ``/v1`` URL.
        model: The model name the server expects.
        api_key: The key (``OPENAI_API_KEY`` when None; servers on 127.0.0.1 accept any).
        timeout_s: Seconds per request.

    Returns:
        The function.
    """
    import os

    import openai

    client = openai.OpenAI(
        base_url=base_url, api_key=api_key or os.environ.get("OPENAI_API_KEY") or "none", timeout=timeout_s
    )

    def complete(messages: list[dict[str, str]]) -> str:
        reply = client.chat.completions.create(model=model, messages=messages, temperature=0.0)  # type: ignore[arg-type]
        return reply.choices[0].message.content or ""

    return complete


# ---------------------------------------------------------------------------- clusters


@dataclass
class Cluster:
    """Documents of one window that share names: what one proposal prompt shows."""

    window_start: str
    rows: list[int] = field(default_factory=list)
    terms: set[str] = field(default_factory=set)
    names: set[str] = field(default_factory=set)


def _midnight(day: date) -> datetime:
    return datetime.combine(day, time(0), tzinfo=UTC)


def document_clusters(corpus: Corpus, config: GenerateConfig) -> list[Cluster]:
    """The clusters of documents available in ``[start, end]`` (see the module docstring), in time order."""
    index = RelevanceIndex(corpus)
    out: list[Cluster] = []
    day = config.start
    while day <= config.end:
        stop = min(day + timedelta(days=config.window_days), config.end + timedelta(days=1))
        lo, hi = index.rows_between(_midnight(day), _midnight(stop))
        clusters: list[Cluster] = []
        for row in range(lo, hi):
            title = corpus.field("title", row) or ""
            text = f"{title}. {corpus.text(row)}"
            words = set(salient_terms(text))
            names = set(name_terms(text))
            for cluster in clusters:
                if len(words & cluster.terms) >= config.min_shared and names & cluster.names:
                    cluster.rows.append(row)
                    cluster.terms |= words
                    cluster.names |= names
                    break
            else:
                clusters.append(Cluster(day.isoformat(), [row], words, names))
        big = [c for c in clusters if len(c.rows) >= config.min_cluster_docs]
        big.sort(key=lambda c: (-len(c.rows), c.rows[0]))
        out.extend(sorted(big[: config.max_clusters_per_window], key=lambda c: c.rows[0]))
        day = stop
    return out


# ---------------------------------------------------------------------------- the two passes


def _json_reply(text: str) -> Any:
    """The JSON object of a reply (the first ``{...}`` block; code fences and prose around it ignored)."""
    match = re.search(r"\{.*\}", text, re.DOTALL)
    if match is None:
        raise DataError("the reply holds no JSON object")
    try:
        return json.loads(match.group(0))
    except json.JSONDecodeError as err:
        raise DataError(f"the reply's JSON does not parse ({err.msg})") from err


def _doc_lines(corpus: Corpus, rows: Sequence[int]) -> str:
    lines = []
    for row in rows:
        day = from_micros(int(corpus.published_us[row])).date().isoformat()
        body = " ".join(corpus.text(row).split())[:SNIPPET_CHARS]
        lines.append(f"[{corpus.field('id', row)}] {day} {corpus.field('title', row) or ''}\n{body}")
    return "\n\n".join(lines)


def _ask_date(corpus: Corpus, rows: Sequence[int]) -> date:
    """The day after the cluster's latest document became available: when its questions are asked."""
    return from_micros(max(int(corpus.available_us[r]) for r in rows)).date() + timedelta(days=1)


@dataclass
class Proposal:
    """One proposed question and what became of it."""

    cluster: int
    asked_on: str
    question: str = ""
    outcomes: list[str] = field(default_factory=list)
    resolution_criteria: str = ""
    resolution_date: str = ""
    background: str = ""
    supporting_doc_ids: list[str] = field(default_factory=list)
    outcome: str | None = None
    resolution_doc_ids: list[str] = field(default_factory=list)
    resolved_at: str | None = None
    dropped: str | None = None
    event_id: str | None = None


def _read_proposal(raw: Any, cluster_ids: set[str]) -> tuple[dict[str, Any], str | None]:
    """A proposal's fields and the reason to drop it (None to keep)."""
    if not isinstance(raw, dict):
        return {}, "malformed: not an object"
    fields: dict[str, Any] = {
        "question": raw.get("question"),
        "outcomes": raw.get("outcomes"),
        "resolution_criteria": raw.get("resolution_criteria") or "",
        "resolution_date": raw.get("resolution_date"),
        "background": raw.get("background") or "",
        "supporting_doc_ids": raw.get("supporting_doc_ids") or [],
    }
    if not isinstance(fields["question"], str) or not fields["question"].strip():
        return {}, "malformed: no question"
    outcomes = fields["outcomes"]
    if (
        not isinstance(outcomes, list)
        or not all(isinstance(o, str) and o.strip() for o in outcomes)
        or len(set(outcomes)) != len(outcomes)
        or not (tuple(outcomes) == BINARY or 3 <= len(outcomes) <= 6)
    ):
        return {}, 'malformed: outcomes must be ["Yes", "No"] or 3 to 6 distinct labels'
    if not all(isinstance(t, str) for t in (fields["resolution_criteria"], fields["background"])):
        return {}, "malformed: texts must be strings"
    if not isinstance(fields["supporting_doc_ids"], list) or not all(
        isinstance(d, str) for d in fields["supporting_doc_ids"]
    ):
        return {}, "malformed: supporting_doc_ids must be a list of ids"
    try:
        date.fromisoformat(str(fields["resolution_date"]))
    except ValueError:
        return {}, "malformed: resolution_date must be YYYY-MM-DD"
    unknown = sorted(set(fields["supporting_doc_ids"]) - cluster_ids)
    if unknown:
        return fields, f"cites documents outside its cluster: {unknown[:3]}"
    return fields, None


def answer_in_question(question: str, outcomes: Sequence[str]) -> str | None:
    """The outcome label (other than Yes/No) a question's text names, if any: it would give its answer away."""
    if tuple(outcomes) == BINARY:
        return None
    words = terms(question)
    for label in outcomes:
        label_terms = salient_terms(label)
        if label_terms and label_terms <= words:
            return label
    return None


def generate_events(
    corpus: Corpus, config: GenerateConfig, cache: ReplyCache, *, progress: bool = True
) -> tuple[ImportResult, dict[str, Any]]:
    """Run clusters -> proposals -> checks -> resolution over a corpus; returns the events and the generation report.

    Args:
        corpus: The dated corpus.
        config: What to generate.
        cache: The model behind its cache.
        progress: Show a progress bar.

    Returns:
        An :class:`ImportResult` (source ``generated``) for the events build, and the report dict
        (``clusters``, ``proposals`` with every kept or dropped question and why, ``dropped`` by reason,
        ``requests``: cache hits and misses).
    """
    from tqdm.auto import tqdm

    index = RelevanceIndex(corpus)
    clusters = document_clusters(corpus, config)
    proposals: list[Proposal] = []
    result = ImportResult(GENERATED_SOURCE)
    limit = _midnight(config.end + timedelta(days=1 + config.resolve_days))
    for number, cluster in enumerate(tqdm(clusters, desc="clusters", unit="cluster", disable=not progress)):
        rows = cluster.rows[: config.max_cluster_docs]
        cluster_ids = {corpus.field("id", r) for r in rows}
        asked = _ask_date(corpus, rows)
        messages = [
            {"role": "system", "content": PROPOSE_SYSTEM},
            {
                "role": "user",
                "content": f"The questions are asked on {asked.isoformat()}; write up to "
                f"{config.questions_per_cluster} questions resolving after that date, from these documents:\n\n"
                + _doc_lines(corpus, rows),
            },
        ]
        try:
            reply = _json_reply(cache.ask("propose", messages))
            raw_questions = reply.get("questions") if isinstance(reply, dict) else None
            if not isinstance(raw_questions, list):
                raise DataError('the reply has no "questions" list')
        except DataError as err:
            proposals.append(Proposal(number, asked.isoformat(), dropped=f"proposal reply: {err}"))
            continue
        for raw in raw_questions[: config.questions_per_cluster]:
            fields, reason = _read_proposal(raw, cluster_ids)
            proposal = Proposal(number, asked.isoformat(), **fields)
            proposals.append(proposal)
            if reason is None:
                reason = _resolve(proposal, asked, limit, corpus, index, config, cache)
            if reason is None:
                try:
                    event = _event(proposal, asked, cache.model)
                except SchemaError as err:
                    reason = f"not a valid event: {err}"
                else:
                    proposal.event_id = event.id
                    result.events.append(event)
            if reason is not None:
                proposal.dropped = reason
                result.skip(reason.split(":")[0], proposal.question[:80] or None)
    dropped: dict[str, int] = {}
    for p in proposals:
        if p.dropped is not None:
            key = p.dropped.split(":")[0]
            dropped[key] = dropped.get(key, 0) + 1
    report = {
        "config": {k: (v.isoformat() if isinstance(v, date) else v) for k, v in asdict(config).items()},
        "model": cache.model,
        "clusters": [
            {
                "window_start": c.window_start,
                "documents": len(c.rows),
                "doc_ids": [corpus.field("id", r) for r in c.rows[: config.max_cluster_docs]],
            }
            for c in clusters
        ],
        "proposals": [asdict(p) for p in proposals],
        "kept": len(result.events),
        "dropped": dict(sorted(dropped.items())),
        "requests": {"cached": cache.hits, "sent": cache.misses},
    }
    return result, report


def _resolve(
    proposal: Proposal,
    asked: date,
    limit: datetime,
    corpus: Corpus,
    index: RelevanceIndex,
    config: GenerateConfig,
    cache: ReplyCache,
) -> str | None:
    """The resolution pass of one checked proposal; returns the reason to drop it (None: resolved)."""
    label = answer_in_question(proposal.question, proposal.outcomes)
    if label is not None:
        return f"answer in question: it names the outcome {label!r}"
    resolution_day = date.fromisoformat(proposal.resolution_date)
    if resolution_day < asked:
        return f"resolves before it is asked: {proposal.resolution_date} < {asked.isoformat()}"
    after = end_of_day(resolution_day)
    if after >= limit:
        return f"resolution date past the corpus window: {proposal.resolution_date}"
    lo, hi = index.rows_between(
        after + timedelta(microseconds=1), after + timedelta(days=config.resolve_days)
    )
    found = index.matches(
        proposal.question, lo, hi, min_coverage=config.min_resolution_coverage, top_k=config.max_resolve_docs
    )
    if not found:
        return "unresolved: no document after the resolution date matches the question"
    rows = sorted(m.row for m in found)
    shown = {corpus.field("id", r): r for r in rows}
    messages = [
        {"role": "system", "content": RESOLVE_SYSTEM},
        {
            "role": "user",
            "content": f"Question: {proposal.question}\nOutcomes: {json.dumps(proposal.outcomes)}\n"
            f"Resolution criteria: {proposal.resolution_criteria}\nResolution date: {proposal.resolution_date}\n\n"
            f"Documents published after the resolution date:\n\n{_doc_lines(corpus, rows)}",
        },
    ]
    try:
        reply = _json_reply(cache.ask("resolve", messages))
    except DataError as err:
        return f"resolution reply: {err}"
    outcome = reply.get("outcome") if isinstance(reply, dict) else None
    cited = reply.get("doc_ids") if isinstance(reply, dict) else None
    if outcome not in proposal.outcomes:
        return f"unresolved: the model answered {str(outcome)[:40]!r}"
    if not isinstance(cited, list) or not {c for c in cited if isinstance(c, str)} & set(shown):
        return "unresolved: the answer cites none of the documents shown"
    used = sorted(c for c in cited if isinstance(c, str) and c in shown)
    first = min(int(corpus.available_us[shown[c]]) for c in used)
    if first < to_micros(_midnight(asked)):  # cannot happen with the window above; kept as the rule
        return "answer before open: a resolving document was available when the question was asked"
    proposal.outcome = str(outcome)
    proposal.resolution_doc_ids = used
    proposal.resolved_at = iso(from_micros(first))
    return None


def _event(proposal: Proposal, asked: date, model: str) -> Event:
    """The event of a resolved proposal (one cutoff at the ask date, like an imported event's open)."""
    key = json.dumps([proposal.question, proposal.outcomes, proposal.resolution_date, proposal.asked_on])
    event_id = f"gen-{hashlib.sha256(key.encode()).hexdigest()[:12]}"
    open_at = _midnight(asked)
    close_at = end_of_day(date.fromisoformat(proposal.resolution_date))
    assert proposal.resolved_at is not None and proposal.outcome is not None
    resolved_at = max(close_at, datetime.fromisoformat(proposal.resolved_at.replace("Z", "+00:00")))
    return Event(
        id=event_id,
        question=proposal.question.strip(),
        outcomes=tuple(proposal.outcomes),
        outcome=proposal.outcome,
        open_at=open_at,
        close_at=close_at,
        resolved_at=resolved_at,
        cutoffs=(open_at,),
        background=proposal.background.strip(),
        resolution_criteria=proposal.resolution_criteria.strip(),
        source=f"{GENERATED_SOURCE}:{model}",
        tags=(GENERATED_SOURCE,),
        extra={
            "generated": {
                "model": model,
                "supporting_doc_ids": list(proposal.supporting_doc_ids),
                "resolution_doc_ids": list(proposal.resolution_doc_ids),
            }
        },
    )


def render_generate_markdown(report: dict[str, Any]) -> str:
    """``generate.md``: what was proposed, what was kept and why the rest was dropped."""
    lines = [
        "# Generated questions",
        "",
        f"Model: {report['model']}; {len(report['clusters'])} document clusters; "
        f"{len(report['proposals'])} proposals; {report['kept']} resolved and passed to the events build.",
        f"Requests: {report['requests']['sent']} sent to the model, {report['requests']['cached']} answered from the cache.",
        "",
        "| dropped because | proposals |",
        "| --- | ---: |",
    ]
    lines += [f"| {reason} | {n} |" for reason, n in report["dropped"].items()] or ["| (none) | 0 |"]
    lines += [
        "",
        "| cluster | asked on | question | outcome | kept / why not |",
        "| ---: | --- | --- | --- | --- |",
    ]
    for p in report["proposals"]:
        question = (p["question"] or "-").replace("|", "/")[:120]
        verdict = p["event_id"] if p["dropped"] is None else p["dropped"].replace("|", "/")[:120]
        lines.append(f"| {p['cluster']} | {p['asked_on']} | {question} | {p['outcome'] or '-'} | {verdict} |")
    return "\n".join(lines) + "\n"
