"""Trajectory logs -> a Hugging Face dataset (parquet) that TRL's ``SFTTrainer`` reads with no glue.

Each kept step record becomes one row: ``messages`` (through the last assistant turn) and ``tools`` (what ``SFTTrainer`` trains on,
rendered by :data:`~forecast_dojo.agents.llm.TOOL_CHAT_TEMPLATE`) plus ``event_id``, ``step``,
``memory``, ``scores``, ``valid``, ``regret`` (against the synthetic oracle where it exists) and the
record's provenance. Filters, in this order, each counted by reason:

1. evaluation events are refused (the synthetic world's held-out split, or the events a build put in
   ``eval.jsonl``, or ids given explicitly): training on them would leak their outcomes;
2. invalid forecasts (``valid_only``), a minimum score, a maximum regret;
3. exact duplicates (same rendered transcript);
4. best-of-k: the ``best_per_step`` highest-scoring records per (event, step, memory);
5. the length policy: a transcript longer than ``max_tokens`` has its longest tool results shortened
   (head kept, a marker says how much was cut), never an assistant turn, the prompt or the answer;
   a record that still does not fit is dropped.
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from forecast_dojo.atomic import write_json_atomic
from forecast_dojo.errors import ExportError as ExportError
from forecast_dojo.records import StepRecord
from forecast_dojo.scoring import SCORING_RULES, all_scores
from forecast_dojo.trajectory import LogNotFoundError, find_run_dirs, load_records, load_run_metadata

SHORTENING_STAGES = (2000, 800, 300, 80)
SHORTENED_MARKER = "[... tool result shortened for training: {kept} of {total} characters kept]"


@dataclass
class ExportConfig:
    """What the export keeps.

    Attributes:
        valid_only: drop records whose forecast was invalid or missing.
        min_score: drop records scoring below this (in ``score_rule``; higher is better).
        max_regret: drop records whose regret against the oracle exceeds this (synthetic world only;
            records without an oracle are kept).
        score_rule: the proper score used by ``min_score``, ``max_regret`` and best-of-k.
        best_per_step: keep the k best records per (event, step, memory); None keeps all.
        deduplicate: drop records whose transcript is identical to one already kept.
        max_tokens: the length budget of a rendered transcript (None: no length policy).
        tokenizer: the tokenizer that measures length (``"smollm2"``, an HF id or a path).
        eval_events: event ids, or paths of event files (JSONL, one event per line), to refuse.
        assume_all_training: export logs whose split cannot be determined (no synthetic world, no
            events build): every event is then treated as training. Off by default.
    """

    valid_only: bool = True
    min_score: float | None = None
    max_regret: float | None = None
    score_rule: str = "brier"
    best_per_step: int | None = 1
    deduplicate: bool = True
    max_tokens: int | None = 2048
    tokenizer: str = "smollm2"
    eval_events: Sequence[str] = ()
    assume_all_training: bool = False

    def __post_init__(self) -> None:
        if self.score_rule not in SCORING_RULES:
            raise ExportError(f"score_rule must be one of {sorted(SCORING_RULES)}, not {self.score_rule!r}")
        if self.best_per_step is not None and self.best_per_step < 1:
            raise ExportError("best_per_step must be >= 1 (or None to keep every record)")
        if self.max_tokens is not None and self.max_tokens < 64:
            raise ExportError("max_tokens must be >= 64 (or None for no length policy)")


@dataclass
class ExportReport:
    """What happened to every record: kept, dropped (by reason), shortened."""

    read: int = 0
    kept: int = 0
    dropped: Counter = field(default_factory=Counter)
    refused_events: set[str] = field(default_factory=set)
    shortened_records: int = 0
    shortened_tool_results: int = 0
    characters_removed: int = 0
    max_tokens_kept: int = 0

    def summary(self) -> str:
        """Readable lines: kept and dropped by reason, refusals, shortening counts."""
        lines = [f"read {self.read} step records; kept {self.kept}"]
        for reason, count in sorted(self.dropped.items()):
            lines.append(f"  dropped {count}: {reason}")
        if self.refused_events:
            events = ", ".join(sorted(self.refused_events))
            lines.append(
                f"  refused {self.dropped['evaluation_event']} records on {len(self.refused_events)} "
                f"evaluation events (never trained on): {events}"
            )
        if self.shortened_records:
            lines.append(
                f"  shortened {self.shortened_tool_results} tool results in {self.shortened_records} records "
                f"({self.characters_removed:,} characters removed; assistant turns kept whole)"
            )
        if self.kept:
            lines.append(f"  longest kept transcript: {self.max_tokens_kept} tokens")
        return "\n".join(lines)

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready values."""
        return {
            "read": self.read,
            "kept": self.kept,
            "dropped": dict(sorted(self.dropped.items())),
            "refused_events": sorted(self.refused_events),
            "shortened_records": self.shortened_records,
            "shortened_tool_results": self.shortened_tool_results,
            "characters_removed": self.characters_removed,
            "max_tokens_kept": self.max_tokens_kept,
        }


def sft_features() -> Any:
    """The ``datasets.Features`` of an export.

    Tool-call arguments are JSON strings (the OpenAI form, which chat templates render as they are) and
    ``tools`` is one JSON string (``SFTTrainer`` decodes it): ``datasets.Json`` would fit their varying
    shapes but round-trips floats with 10-15 digits, which would change the text trained on.
    """
    from datasets import Features, List, Value

    message = {
        "role": Value("string"),
        "content": Value("string"),
        "tool_calls": List(
            {
                "id": Value("string"),
                "type": Value("string"),
                "function": {"name": Value("string"), "arguments": Value("string")},
            }
        ),
        "tool_call_id": Value("string"),
        "name": Value("string"),
    }
    scores = {name: Value("float64") for name in SCORING_RULES}
    return Features(
        {
            "messages": List(message),
            "tools": Value("string"),
            "event_id": Value("string"),
            "step": Value("int64"),
            "memory": Value("string"),
            "prompt_profile": Value("string"),
            "run_id": Value("string"),
            "agent": Value("string"),
            "source": Value("string"),
            "outcomes": List(Value("string")),
            "outcome_index": Value("int64"),
            "forecast": List(Value("float64")),
            "valid": Value("bool"),
            "flags": List(Value("string")),
            "scores": scores,
            "oracle_scores": scores,
            "regret": Value("float64"),
            "notebook_in": Value("string"),
            "shortened_tool_results": Value("int64"),
        }
    )


# ----------------------------------------------------------------------------- reading logs and splits


def _run_dirs(logs: Iterable[str | Path]) -> list[Path]:
    """Run directories (:func:`forecast_dojo.trajectory.find_run_dirs`), a bad path as an :class:`ExportError`."""
    try:
        return find_run_dirs(logs)
    except LogNotFoundError as err:
        raise ExportError(str(err)) from err


def _event_ids_from(source: str) -> set[str]:
    """Ids from a JSONL event file (its ``id`` fields) or a literal id."""
    path = Path(source)
    if not path.is_file():
        return {source}
    ids = set()
    with path.open(encoding="utf-8") as fh:
        for line in fh:
            if line.strip():
                ids.add(str(json.loads(line)["id"]))
    return ids


def evaluation_event_ids(run_metadata: dict[str, Any], config: ExportConfig) -> set[str] | None:
    """The evaluation events of a run's world, or None when the run says nothing about its split.

    Synthetic world: the held-out part of :func:`forecast_dojo.synthetic.split.synthetic_split`.
    Events from an ``events build`` folder: the ids in its ``eval.jsonl``. Plus ``config.eval_events``.
    """
    explicit: set[str] = set()
    for source in config.eval_events:
        explicit |= _event_ids_from(source)
    spec = run_metadata.get("env_spec") or {}
    if spec.get("world") == "synthetic":
        from forecast_dojo.synthetic.split import synthetic_split

        return explicit | set(synthetic_split(int(spec.get("seed", 0))).held_out)
    events_path = spec.get("events")
    if events_path:
        from forecast_dojo.events.split import SPLIT_FILES

        eval_file = Path(events_path).parent / SPLIT_FILES["eval"]
        if eval_file.is_file():
            return explicit | _event_ids_from(str(eval_file))
    if explicit:
        return explicit
    return None


_oracles: dict[tuple[int, int], dict[tuple[str, int], tuple[float, ...]]] = {}


def oracle_forecasts(run_metadata: dict[str, Any]) -> dict[tuple[str, int], tuple[float, ...]] | None:
    """The synthetic world's Bayes-optimal forecast per (event, step), or None for other worlds."""
    spec = run_metadata.get("env_spec") or {}
    if spec.get("world") != "synthetic":
        return None
    key = (int(spec.get("seed", 0)), int(spec.get("train_events", 0)))  # the training world's extra events
    if key not in _oracles:
        from forecast_dojo.synthetic import generate_world, oracle_table

        _oracles[key] = {
            (row["event_id"], row["step"]): tuple(row["probabilities"])
            for row in oracle_table(generate_world(key[0], train_events=key[1]))
        }
    return _oracles[key]


# ----------------------------------------------------------------------------- length policy


def shorten_tool_results(
    messages: list[dict[str, Any]], count_tokens: Any, max_tokens: int
) -> tuple[list[dict[str, Any]], int, int] | None:
    """Fit a transcript into ``max_tokens`` by shortening tool results only, longest first.

    Each stage caps every tool result at fewer characters (``SHORTENING_STAGES``), keeping its head
    and a marker with the original length. Assistant turns, the system prompt and the user prompt are
    never touched.

    Args:
        messages: the transcript (not modified).
        count_tokens: ``messages -> int``, the rendered length.
        max_tokens: the budget.

    Returns:
        ``(messages, n_shortened, characters_removed)``, or None when even the shortest stage does not fit.
    """
    if count_tokens(messages) <= max_tokens:
        return messages, 0, 0
    for cap in SHORTENING_STAGES:
        shortened = []
        n_shortened = removed = 0
        for message in messages:
            content = message.get("content") or ""
            if message["role"] == "tool" and len(content) > cap:
                kept = content[:cap]
                marker = SHORTENED_MARKER.format(kept=len(kept), total=len(content))
                message = {**message, "content": f"{kept}\n{marker}"}
                n_shortened += 1
                removed += len(content) - len(kept)
            shortened.append(message)
        if count_tokens(shortened) <= max_tokens:
            return shortened, n_shortened, removed
    return None


def token_counter(tokenizer: Any) -> Any:
    """``messages -> number of tokens`` as :data:`TOOL_CHAT_TEMPLATE` renders them for training."""
    from forecast_dojo.agents.llm import TOOL_CHAT_TEMPLATE

    def count(messages: list[dict[str, Any]]) -> int:
        ids = tokenizer.apply_chat_template(messages, chat_template=TOOL_CHAT_TEMPLATE, tokenize=True)
        if isinstance(ids, dict) or hasattr(ids, "keys"):
            ids = ids["input_ids"]
        return len(ids)

    return count


# ----------------------------------------------------------------------------- the export


def encode_messages(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Messages with every tool call's arguments as a JSON string, rendered exactly as the dict would be."""
    encoded = []
    for message in messages:
        calls = message.get("tool_calls")
        if calls:
            calls = [
                {
                    **call,
                    "function": {
                        "name": call["function"]["name"],
                        "arguments": call["function"]["arguments"]
                        if isinstance(call["function"]["arguments"], str)
                        else json.dumps(call["function"]["arguments"], ensure_ascii=False),
                    },
                }
                for call in calls
            ]
        encoded.append({**message, "tool_calls": calls or None})
    return encoded


def through_last_assistant_turn(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The transcript up to and including its last assistant turn.

    What follows it (the tool's reply to the final ``submit_forecast``, "forecast recorded: ...") is
    never trained on (``assistant_only_loss``), so it would only lengthen the row: 15-30 tokens of a
    compact record. A transcript with no assistant turn is returned whole.
    """
    last = max((i for i, m in enumerate(messages) if m.get("role") == "assistant"), default=len(messages) - 1)
    return [dict(m) for m in messages[: last + 1]]


def _transcript_key(messages: list[dict[str, Any]]) -> str:
    return hashlib.sha256(json.dumps(messages, sort_keys=True, ensure_ascii=False).encode()).hexdigest()


def _row(
    record: StepRecord,
    metadata: dict[str, Any],
    run_dir: Path,
    scores: dict[str, float],
    oracle_scores: dict[str, float] | None,
    regret: float | None,
) -> dict[str, Any]:
    """One export row of a record (see :func:`sft_features`)."""
    return {
        "messages": encode_messages(through_last_assistant_turn(record.messages)),
        "tools": json.dumps(record.tools, ensure_ascii=False),
        "event_id": record.event_id,
        "step": int(record.step),
        "memory": record.memory,
        "prompt_profile": record.prompt,  # not "prompt": TRL reads a "prompt" column as prompt-completion data
        "run_id": record.run_id or metadata.get("run_id"),
        "agent": metadata.get("agent"),
        "source": str(run_dir),
        "outcomes": list(record.outcomes),
        "outcome_index": int(record.outcome_index),
        "forecast": [float(p) for p in record.forecast],
        "valid": bool(record.valid),
        "flags": list(record.flags),
        "scores": scores,
        "oracle_scores": oracle_scores,
        "regret": regret,
        "notebook_in": record.notebook_in,
        "shortened_tool_results": 0,
    }


def build_sft_rows(
    logs: Iterable[str | Path], config: ExportConfig | None = None, *, tokenizer: Any = None
) -> tuple[list[dict[str, Any]], ExportReport]:
    """The rows an export would write, and the report of what was kept and dropped (nothing is written).

    Args:
        logs: run directories, ``steps.jsonl`` files, or folders of run directories.
        config: the filters (default :class:`ExportConfig`).
        tokenizer: measures length for ``config.max_tokens``; default ``load_tokenizer(config.tokenizer)``.

    Returns:
        ``(rows, report)``.
    """
    config = config or ExportConfig()
    report = ExportReport()
    candidates: list[dict[str, Any]] = []
    for run_dir in _run_dirs(logs):
        metadata = load_run_metadata(run_dir, missing_ok=True)
        held_out = evaluation_event_ids(metadata, config)
        if held_out is None and not config.assume_all_training:
            raise ExportError(
                f"{run_dir}: cannot tell training from evaluation events (not the synthetic world, no events "
                "build with an eval.jsonl next to its events); pass eval_events (--eval-events) or "
                "assume_all_training (--assume-all-training)"
            )
        oracle = oracle_forecasts(metadata)
        # The trajectory's one reader: a killed run's torn last line is dropped (with a warning), as
        # `forecast-dojo run` does when it resumes the log; duplicate keys keep the first record.
        for record in load_records(run_dir):
            report.read += 1
            if held_out and record.event_id in held_out:
                report.dropped["evaluation_event"] += 1
                report.refused_events.add(record.event_id)
                continue
            scores = {k: float(v) for k, v in record.scores.items()}
            oracle_scores = None
            regret = None
            oracle_forecast = oracle.get((record.event_id, record.step)) if oracle else None
            if oracle_forecast is not None:
                oracle_scores = all_scores(oracle_forecast, record.outcome_index)
                regret = oracle_scores[config.score_rule] - scores[config.score_rule]
            if config.valid_only and not record.valid:
                report.dropped["invalid_forecast"] += 1
                continue
            if config.min_score is not None and scores[config.score_rule] < config.min_score:
                report.dropped[f"score_below_{config.min_score}"] += 1
                continue
            if config.max_regret is not None and regret is not None and regret > config.max_regret:
                report.dropped[f"regret_above_{config.max_regret}"] += 1
                continue
            candidates.append(_row(record, metadata, run_dir, scores, oracle_scores, regret))

    profiles = sorted({row["prompt_profile"] for row in candidates})
    if len(profiles) > 1:  # a model trained on both would learn two prompt formats for one task
        sources = {p: sorted({r["source"] for r in candidates if r["prompt_profile"] == p}) for p in profiles}
        raise ExportError(
            "logs of different prompt profiles cannot be exported together (never a mix): "
            + "; ".join(f"{p}: {', '.join(dirs)}" for p, dirs in sources.items())
        )

    if config.deduplicate:
        seen: set[str] = set()
        unique = []
        for row in candidates:
            key = _transcript_key(row["messages"])
            if key in seen:
                report.dropped["duplicate"] += 1
                continue
            seen.add(key)
            unique.append(row)
        candidates = unique

    if config.best_per_step is not None:
        groups: dict[tuple[str, int, str], list[dict[str, Any]]] = {}
        for row in candidates:
            groups.setdefault((row["event_id"], row["step"], row["memory"]), []).append(row)
        best = []
        for group in groups.values():
            ranked = sorted(
                group, key=lambda r: -r["scores"][config.score_rule]
            )  # stable: first logged wins ties
            best.extend(ranked[: config.best_per_step])
            report.dropped[f"not_best_{config.best_per_step}_of_k"] += max(
                0, len(group) - config.best_per_step
            )
        order = {id(row): i for i, row in enumerate(candidates)}
        candidates = sorted(best, key=lambda r: order[id(r)])

    rows = []
    if config.max_tokens is not None:
        if tokenizer is None:
            from forecast_dojo.agents.llm import load_tokenizer

            tokenizer = load_tokenizer(config.tokenizer)
        count = token_counter(tokenizer)
        for row in candidates:
            fitted = shorten_tool_results(row["messages"], count, config.max_tokens)
            if fitted is None:
                report.dropped[f"longer_than_{config.max_tokens}_tokens_after_shortening"] += 1
                continue
            messages, n_shortened, removed = fitted
            if n_shortened:
                report.shortened_records += 1
                report.shortened_tool_results += n_shortened
                report.characters_removed += removed
            report.max_tokens_kept = max(report.max_tokens_kept, count(messages))
            rows.append({**row, "messages": messages, "shortened_tool_results": n_shortened})
    else:
        rows = candidates
    report.dropped = Counter({k: v for k, v in report.dropped.items() if v})
    report.kept = len(rows)
    return rows, report


def export_sft(
    logs: Iterable[str | Path] | str | Path,
    out: str | Path | None = None,
    config: ExportConfig | None = None,
    *,
    tokenizer: Any = None,
    verbose: bool = True,
) -> Any:
    """Export logs as an SFT dataset; returns it (a ``datasets.Dataset``) and writes ``out`` if given.

    ``out`` receives ``train.parquet`` (load it with ``datasets.load_dataset("parquet", ...)`` or
    :func:`load_sft_dataset`) and ``export.json`` (the configuration and the report).

    Args:
        logs: run directories, ``steps.jsonl`` files, or folders of run directories (one path or many).
        out: the output directory, or None to write nothing.
        config: the filters (default :class:`ExportConfig`).
        tokenizer: measures length (default ``load_tokenizer(config.tokenizer)``).
        verbose: print what was kept and dropped, by reason.

    Returns:
        The dataset (columns ``messages``, ``tools`` and the metadata listed in :func:`sft_features`).
    """
    from datasets import Dataset

    if isinstance(logs, (str, Path)):
        logs = [logs]
    config = config or ExportConfig()
    rows, report = build_sft_rows(logs, config, tokenizer=tokenizer)
    if verbose:
        print(report.summary())
    if not rows:
        raise ExportError("no record survived the filters:\n" + report.summary())
    dataset = Dataset.from_list(rows, features=sft_features())
    if out is not None:
        out = Path(out)
        out.mkdir(parents=True, exist_ok=True)
        dataset.to_parquet(str(out / "train.parquet"))
        meta = {"config": {k: list(v) if isinstance(v, tuple) else v for k, v in vars(config).items()}}
        meta["report"] = report.to_dict()
        meta["prompt_profile"] = rows[0]["prompt_profile"]  # the one prompt profile of the rows
        write_json_atomic(out / "export.json", meta, default=str)
        if verbose:
            print(f"wrote {len(rows)} rows to {out / 'train.parquet'}")
    return dataset


def load_sft_dataset(path: str | Path) -> Any:
    """An export's ``train.parquet`` (give the export directory or the file) as a ``datasets.Dataset``."""
    from datasets import load_dataset

    path = Path(path)
    file = path / "train.parquet" if path.is_dir() else path
    if not file.is_file():
        raise ExportError(f"{file}: no export here (run forecast-dojo export sft first)")
    return load_dataset("parquet", data_files=str(file), split="train")
