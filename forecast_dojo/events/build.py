"""The events pipeline behind ``forecast-dojo events build``.

import -> select -> schedule -> screen -> split -> write ``train.jsonl``, ``eval.jsonl``,
``all.jsonl``, ``report.json`` and ``report.md``.

Every event that enters and does not come out is accounted for in the report, by stage and reason.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any

from forecast_dojo.corpus.store import Corpus
from forecast_dojo.errors import BuildConfigError as BuildConfigError
from forecast_dojo.errors import InputNotFoundError, OutputExistsError
from forecast_dojo.events.judge import LeakageJudge
from forecast_dojo.events.leakage import (
    MEASURED_ON_LABELS,
    MEASURED_ON_UNSEEN,
    LeakageConfig,
    LeakageFlag,
    OutcomePublic,
    apply_exclusions,
    load_labelled_pairs,
    measure_screen,
    outcome_public,
    screen_event,
)
from forecast_dojo.events.relevance import RelevanceIndex
from forecast_dojo.events.result import ImportResult
from forecast_dojo.events.schedule import ScheduleConfig, schedule_event, trim_before, truncate_at
from forecast_dojo.events.schedule_leak import describe, schedule_leak_report
from forecast_dojo.events.selection import EvidenceJudge, SelectionConfig, select_events
from forecast_dojo.events.sibling_leak import describe_sibling_leaks, sibling_leak_audit
from forecast_dojo.events.split import Window, split_events, split_stats
from forecast_dojo.schema import Event, save_events

OUTPUT_FILES = ("train.jsonl", "eval.jsonl", "all.jsonl", "decisions.jsonl", "report.json", "report.md")


@dataclass(frozen=True)
class BuildConfig:
    """Everything that decides which events come out: filters, schedule, screen and split windows."""

    train_window: Window
    eval_window: Window
    selection: SelectionConfig = field(default_factory=SelectionConfig)
    schedule: ScheduleConfig = field(default_factory=ScheduleConfig)
    leakage: LeakageConfig = field(default_factory=LeakageConfig)
    min_eval_steps: int = 3
    exclude_leaks: bool = True
    trim_into_eval: bool = False
    outcome_rate_gap: float = 0.10

    def __post_init__(self) -> None:
        if self.selection.buffer_days != self.schedule.buffer_days:
            raise BuildConfigError(
                f"selection.buffer_days ({self.selection.buffer_days}) must equal schedule.buffer_days ({self.schedule.buffer_days})"
            )

    def as_dict(self) -> dict[str, Any]:
        """The configuration as plain JSON values (written into the report)."""
        return {
            "train_window": self.train_window.describe(),
            "eval_window": self.eval_window.describe(),
            "selection": asdict(self.selection),
            "schedule": asdict(self.schedule),
            "leakage": asdict(self.leakage),
            "min_eval_steps": self.min_eval_steps,
            "exclude_leaks": self.exclude_leaks,
            "trim_into_eval": self.trim_into_eval,
            "outcome_rate_gap": self.outcome_rate_gap,
        }


def override(section: Any, values: dict[str, Any], where: str) -> Any:
    """A copy of a config dataclass with ``values`` applied; unknown keys and wrong types are errors."""
    if not is_dataclass(section) or isinstance(section, type):
        raise TypeError(f"{where}: not a config section")
    known = {f.name: f for f in fields(section)}
    changes = {}
    for key, value in values.items():
        if key not in known:
            raise BuildConfigError(f"{where}: unknown option {key!r}; known: {sorted(known)}")
        current = getattr(section, key)
        if isinstance(current, bool):
            ok = isinstance(value, bool)
        elif isinstance(current, (int, float)):
            ok = isinstance(value, (int, float)) and not isinstance(value, bool)
            ok = ok and (isinstance(current, float) or isinstance(value, int))
        else:
            ok = isinstance(value, type(current))
        if not ok:
            raise BuildConfigError(f"{where}.{key}: expected {type(current).__name__}, got {value!r}")
        changes[key] = float(value) if isinstance(current, float) else value
    return replace(section, **changes)


def load_config_file(path: Path) -> dict[str, dict[str, Any]]:
    """Sections ``selection``, ``schedule`` and ``leakage`` from a TOML file (the format of specs and recipes).

    TOML is the one config-file format: a ``.json``, ``.yaml`` or ``.yml`` file is refused with a
    message showing the same settings as TOML.

    Raises:
        InputNotFoundError: No such file.
        BuildConfigError: Not a TOML file, or one that cannot be parsed, or holds unknown sections or
            non-table sections.
    """
    import tomllib

    if not path.is_file():
        raise InputNotFoundError(f"{path}: config file not found")
    if path.suffix.lower() in (".json", ".yaml", ".yml"):
        raise BuildConfigError(
            f"{path}: events build configs are TOML (like specs and corpus recipes), not "
            f"{path.suffix.lstrip('.').upper()}; write the sections as TOML tables, e.g. "
            "'[selection]' then 'min_faithful_fraction = 0.5', in a .toml file"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as err:
        raise BuildConfigError(f"{path}: not UTF-8 text ({err})") from err
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise BuildConfigError(f"{path}: not valid TOML ({err})") from err
    unknown = set(data) - {"selection", "schedule", "leakage"}
    if unknown:
        raise BuildConfigError(
            f"{path}: unknown section(s) {sorted(unknown)}; known: selection, schedule, leakage"
        )
    for name, section in data.items():
        if not isinstance(section, dict):
            raise BuildConfigError(f"{path}: section {name!r} must be a mapping")
    return data


@dataclass
class BuildOutput:
    """The events of each split and the report that describes how they were made."""

    train: list[Event]
    eval: list[Event]
    all: list[Event]
    report: dict[str, Any]
    decisions: list[dict[str, Any]] = field(default_factory=list)


def build_events(
    imports: Sequence[ImportResult],
    config: BuildConfig,
    *,
    corpus: Corpus | None = None,
    judge: EvidenceJudge | None = None,
    progress: bool = True,
    leakage_labels: Sequence[str | Path] = (),
    leakage_judge: LeakageJudge | None = None,
) -> BuildOutput:
    """Run selection, schedule, leakage screen and split over imported events; nothing is written.

    ``leakage_labels`` are labelled (question, document) files (see
    :func:`forecast_dojo.events.leakage.load_labelled_pairs`) on which the screen's precision and
    recall are measured into the report; ``leakage_judge`` is the optional LLM judge of the screen
    (``forecast_dojo.events.judge``), whose verdicts go to ``decisions.jsonl``.
    """
    from tqdm.auto import tqdm

    report: dict[str, Any] = {"config": config.as_dict(), "imports": [r.summary() for r in imports]}
    events: list[Event] = []
    seen: set[str] = set()
    duplicates: list[str] = []
    for result in imports:
        for event in result.events:
            if event.id in seen:
                duplicates.append(event.id)
                continue
            seen.add(event.id)
            events.append(event)
    report["imported"] = {"events": len(events), "duplicate_ids_dropped": len(duplicates)}
    if corpus is not None:
        manifest = corpus.manifest
        report["corpus"] = {
            "path": str(corpus.path),
            "documents": len(corpus),
            "embedder": corpus.embedder_name,
            "available_from": manifest.get("available_from"),
            "available_to": manifest.get("available_to"),
            "content_hash": corpus.content_hash,
        }
    else:
        report["corpus"] = None

    index = RelevanceIndex(corpus) if corpus is not None else None
    # The schedule comes first: selection judges near-certainty at the first date it would use.
    schedules = {
        event.id: schedule_event(event, config.schedule, corpus)
        for event in tqdm(events, desc="scheduling forecast dates", disable=not progress)
    }

    def first_forecast_at(event: Event) -> Any:
        made = schedules.get(event.id)
        return None if made is None else made.cutoffs[0]

    selected = select_events(
        events,
        config.selection,
        index=index,
        judge=judge,
        progress=progress,
        first_forecast_at=first_forecast_at,
    )
    report["selection"] = selected.summary()

    scheduled: list[Event] = []
    no_dates: list[str] = []
    for event in selected.kept:
        made = schedules[event.id]
        if made is None:
            no_dates.append(event.id)
        else:
            scheduled.append(made)
    report["schedule"] = {
        "scheduled": len(scheduled),
        "dropped_no_forecast_dates": len(no_dates),
        "dropped_examples": no_dates[:5],
        "steps": dict(sorted(Counter(e.n_steps for e in scheduled).items())),
        "fewer_than_min_steps": sum(e.n_steps < config.schedule.min_steps for e in scheduled),
    }

    trimmed = 0
    if config.trim_into_eval:
        # An event that closes inside the evaluation window but opened before it keeps only its
        # forecast dates inside the window (before the screen: its exclusions are per step).
        window = config.eval_window
        kept_events = []
        for event in scheduled:
            if event.cutoffs[0] < window.start and window.start < event.close_at <= window.end:
                cut = trim_before(event, window.start)
                if cut is not None and cut.n_steps >= config.min_eval_steps:
                    event, trimmed = cut, trimmed + 1
            kept_events.append(event)
        scheduled = kept_events
    report["schedule"]["trimmed_into_eval"] = trimmed

    flags: list[LeakageFlag] = []
    verdicts: list[dict[str, Any]] = []
    publics: list[OutcomePublic] = []
    # Outcome-public truncation: the screen runs over the whole life of each event, and the schedule
    # ends before the first date at which a flagged document is visible (--keep-leaks lists only).
    truncating = index is not None and config.exclude_leaks and config.leakage.truncate_public
    if index is not None:
        screened = []
        for event in tqdm(scheduled, desc="leakage screen", disable=not progress):
            found = screen_event(
                event, index, config.leakage, whole_life=truncating, judge=leakage_judge, verdicts=verdicts
            )
            flags.extend(found)
            public = outcome_public(event, found, config.leakage.public_min_steps) if truncating else None
            if public is not None:
                publics.append(public)
                if public.leaves:
                    continue
                event = truncate_at(event, public.steps_kept)
                event = replace(event, extra={**event.extra, "outcome_public": public.record()})
                found = [f for f in found if f.first_step < event.n_steps]  # none, by construction
            screened.append(apply_exclusions(event, found if config.exclude_leaks else []))
        scheduled = screened
    report["leakage"] = {
        "run": index is not None,
        "mode": config.leakage.mode,
        "measured_on_labels": MEASURED_ON_LABELS.get(config.leakage.mode),
        "measured_on_unseen": MEASURED_ON_UNSEEN.get(config.leakage.mode),
        "measured_on_unseen_heldout": MEASURED_ON_UNSEEN.get(f"{config.leakage.mode}_heldout"),
        "judge": leakage_judge.summary() if leakage_judge is not None else None,
        "judge_verdicts": len(verdicts),
        "excluded_from_episodes": config.exclude_leaks,
        "flagged_documents": len(flags),
        "events_with_flags": len({f.event_id for f in flags}),
        "flags": [asdict(f) for f in flags],
        "outcome_public": {
            "run": truncating,
            "min_steps": config.leakage.public_min_steps,
            "truncated_events": sum(not p.leaves for p in publics),
            "events_left": sum(p.leaves for p in publics),
            "steps_removed": sum(p.steps_removed for p in publics if not p.leaves),
            "steps_of_events_left": sum(p.steps_removed for p in publics if p.leaves),
            "events": [{"event_id": p.event_id, "leaves": p.leaves, **p.record()} for p in publics],
        },
    }

    measured = []
    for labels_path in leakage_labels:
        pairs, not_rebuilt = load_labelled_pairs(labels_path, events=events, corpus=corpus)
        measured.append(
            {"file": str(labels_path), "not_rebuilt": not_rebuilt}
            | measure_screen(pairs, config.leakage, leakage_judge)
        )
    report["leakage"]["labelled"] = measured
    if leakage_judge is not None:
        report["leakage"]["judge"] = leakage_judge.summary()  # again: the labelled pairs asked it too

    split = split_events(
        scheduled, config.train_window, config.eval_window, min_eval_steps=config.min_eval_steps
    )
    report["split"] = {
        "train": split_stats(split.train),
        "eval": split_stats(split.eval),
        "neither": {reason: len(ids) for reason, ids in sorted(split.neither.items())},
    }
    report["outcome_rates"] = outcome_rates(
        {"train": split.train, "eval": split.eval}, gap=config.outcome_rate_gap
    )
    report["sibling_leaks"] = {  # cross-question: an answer written in another question of the split
        name: sibling_leak_audit(part) for name, part in (("train", split.train), ("eval", split.eval))
    }
    report["schedule_leak"] = schedule_leak_report(
        scheduled, {"train": split.train, "eval": split.eval}, seed=config.schedule.seed
    )
    decisions = _decisions(events, selected.decisions, no_dates, flags, split, publics, verdicts)
    report["warnings"] = attrition_warnings(len(events), len(scheduled), decisions)
    report["decisions"] = dict(sorted(Counter(d["outcome"] for d in decisions).items()))
    report["dropped_questions"] = [
        {k: d[k] for k in ("event_id", "question", "source", "stage", "rule", "reason")}
        for d in decisions
        if d["outcome"] == "dropped"
    ]
    return BuildOutput(train=split.train, eval=split.eval, all=scheduled, report=report, decisions=decisions)


def _wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    """The 95 % Wilson score interval of a proportion ``k / n``."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * ((p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5) / (1 + z * z / n)
    return round(max(0.0, centre - half), 4), round(min(1.0, centre + half), 4)


def outcome_rates(splits: dict[str, Sequence[Event]], *, gap: float) -> dict[str, Any]:
    """The outcome rate of each split, and a note when train and eval differ by more than ``gap``.

    The rate is the share of events whose realized outcome is their first label (``Yes`` for a
    binary question), with a 95 % Wilson interval; ``by_label`` gives the share of each realized
    label. A base rate fitted on the training split is miscalibrated for evaluation when the two
    differ, which the note says (``gap`` is an absolute difference of shares, 0.10 = 10 points).
    """
    out: dict[str, Any] = {"threshold": gap}
    for name, events in splits.items():
        n = len(events)
        first = sum(e.outcome_index == 0 for e in events)
        out[name] = {
            "events": n,
            "first_label": first,
            "rate": round(first / n, 4) if n else None,
            "interval95": _wilson(first, n) if n else None,
            "by_label": {k: round(v / n, 4) for k, v in Counter(e.outcome for e in events).most_common()},
        }
    rates = {name: out[name]["rate"] for name in splits}
    out["gap"] = None
    out["note"] = None
    if rates.get("train") is not None and rates.get("eval") is not None:
        difference = round(abs(rates["train"] - rates["eval"]), 4)
        out["gap"] = difference
        if difference > gap:
            out["note"] = (
                f"outcome rates differ between the splits: {rates['train']:.1%} first label (Yes) in train "
                f"vs {rates['eval']:.1%} in eval ({difference * 100:.1f} points > {gap * 100:.0f}); a base rate "
                "fitted on train is miscalibrated for eval"
            )
    return out


def describe_outcome_rates(rates: dict[str, Any]) -> str:
    """One line: each split's first-label (Yes) rate with its interval and count."""
    parts = []
    for name in ("train", "eval"):
        r = rates.get(name) or {}
        if r.get("rate") is None:
            parts.append(f"{name} n/a (0 events)")
        else:
            lo, hi = r["interval95"]
            parts.append(f"{name} {r['rate']:.1%} [{lo:.1%}, {hi:.1%}] ({r['first_label']} of {r['events']})")
    return "outcome rate (first label, Yes for binary): " + ", ".join(parts)


MIN_KEPT_FRACTION = 0.10
# What to change when a stage removes most events: the option names of --config sections.
STAGE_OPTIONS = {
    "language": "selection.require_english / selection.drop_personal",
    "horizon": "selection.min_horizon_days",
    "faithfulness": "selection.min_faithful_fraction / selection.max_unfaithful_run_days",
    "non_triviality": "selection.near_certain / selection.flat_min_points",
    "evidence": "selection.evidence_min_documents / selection.evidence_min_coverage / "
    "selection.evidence_lookback_days, or a corpus that covers these questions (--corpus)",
    "no_forecast_dates": "schedule.buffer_days, or a corpus covering the questions' lifetimes",
    "outcome_public": "leakage.public_min_steps / leakage.truncate_public",
}


def attrition_warnings(imported: int, kept: int, decisions: Sequence[dict[str, Any]]) -> list[str]:
    """A warning when the build keeps under :data:`MIN_KEPT_FRACTION` of what it imported.

    The warning names the rule that removed the most, its top reasons (numbers folded to ``N``) and
    the option to change.
    """
    import re

    if imported == 0 or kept >= MIN_KEPT_FRACTION * imported:
        return []
    dropped = [d for d in decisions if d["outcome"] == "dropped"]
    by_rule = Counter(d["rule"] for d in dropped)
    if not by_rule:
        return [f"events build keeps {kept} of {imported} imported events ({kept / imported:.1%})"]
    rule, count = by_rule.most_common(1)[0]
    reasons = Counter(re.sub(r"\d+(?:\.\d+)?", "N", d["reason"] or "") for d in dropped if d["rule"] == rule)
    top = "; ".join(f"{reason} x{n}" for reason, n in reasons.most_common(3))
    return [
        f"events build keeps {kept} of {imported} imported events ({kept / imported:.1%}); "
        f"{rule} removed {count} ({top}); to change: {STAGE_OPTIONS.get(rule, rule)}"
    ]


def _decisions(
    events: Sequence[Event],
    selection: dict[str, dict[str, Any]],
    no_dates: Sequence[str],
    flags: Sequence[LeakageFlag],
    split: Any,
    publics: Sequence[OutcomePublic] = (),
    verdicts: Sequence[dict[str, Any]] = (),
) -> list[dict[str, Any]]:
    """One record per imported event saying where it ended and why.

    Each record has the destination (train, eval, neither, dropped), the stage and rule that decided
    it, and the numbers behind the decision. An event whose outcome was public before its last
    scheduled date also has ``outcome_public`` (first date it was public, the document ids, steps
    removed and kept); one left with too few steps is dropped at stage ``leakage``, rule
    ``outcome_public``. With the leakage judge, ``leakage_judge`` lists its verdicts on the event's
    documents (``doc_id``, ``lexical``: the lexical screen's decision, ``judge``: true, false or null
    when it gave no usable answer, ``cached``).
    """
    no_dates_set = set(no_dates)
    judged: dict[str, list[dict[str, Any]]] = {}
    for verdict in verdicts:
        judged.setdefault(verdict["event_id"], []).append(
            {k: v for k, v in verdict.items() if k != "event_id"}
        )
    public_of = {p.event_id: p for p in publics}
    neither = {event_id: reason for reason, ids in split.neither.items() for event_id in ids}
    train, evaluation = {e.id for e in split.train}, {e.id for e in split.eval}
    flagged = Counter(f.event_id for f in flags)
    out = []
    for event in events:
        chosen = selection.get(event.id, {"decision": "kept", "rule": None, "reason": None, "numbers": {}})
        record: dict[str, Any] = {
            "event_id": event.id,
            "question": event.question,
            "source": event.source,
            "outcome": "dropped",
            "stage": "selection",
            "rule": chosen["rule"],
            "reason": chosen["reason"],
            "numbers": dict(chosen["numbers"]),
        }
        if chosen["decision"] == "kept":
            public = public_of.get(event.id)
            if public is not None:
                record["outcome_public"] = public.record()
            if event.id in no_dates_set:
                record.update(stage="schedule", rule="no_forecast_dates", reason="no forecast date available")
            elif public is not None and public.leaves:
                record.update(
                    stage="leakage",
                    rule="outcome_public",
                    reason=f"outcome public from {public.first_public_date} ({', '.join(public.doc_ids)}): "
                    f"{public.steps_kept} steps before it, fewer than leakage.public_min_steps",
                )
            elif event.id in train or event.id in evaluation:
                record.update(outcome="train" if event.id in train else "eval", stage="split", rule=None)
            else:
                reason = neither.get(event.id, "unknown")
                record.update(outcome="neither", stage="split", rule=reason, reason=reason)
            record["numbers"]["leakage_flags"] = flagged.get(event.id, 0)
            if event.id in judged:
                record["leakage_judge"] = judged[event.id]
        out.append(record)
    return out


def write_outputs(output: BuildOutput, out_dir: str | Path, *, overwrite: bool = False) -> dict[str, Path]:
    """Write the events files and both reports into ``out_dir``; refuses to replace files unless asked."""
    out = Path(out_dir)
    existing = [name for name in OUTPUT_FILES if (out / name).exists()]
    if existing and not overwrite:
        raise OutputExistsError(
            f"{out} already holds {existing}; pass overwrite=True (--overwrite) to replace them"
        )
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "train": save_events(output.train, out / "train.jsonl"),
        "eval": save_events(output.eval, out / "eval.jsonl"),
        "all": save_events(output.all, out / "all.jsonl"),
    }
    with (out / "decisions.jsonl").open("w", encoding="utf-8") as fh:
        for record in output.decisions:
            fh.write(json.dumps(record, ensure_ascii=False) + "\n")
    paths["decisions"] = out / "decisions.jsonl"
    output.report["files"] = {name: str(path) for name, path in paths.items()}
    (out / "report.json").write_text(json.dumps(output.report, indent=2, sort_keys=False, ensure_ascii=False))
    (out / "report.md").write_text(render_markdown(output.report), encoding="utf-8")
    paths["report_json"], paths["report_md"] = out / "report.json", out / "report.md"
    return paths


def _table(rows: list[tuple[Any, ...]], header: tuple[str, ...]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def render_summary(report: dict[str, Any]) -> str:
    """The few lines printed after a build: what came in, what each stage removed, what came out."""
    lines = []
    for imp in report["imports"]:
        skipped = ", ".join(f"{k} {v}" for k, v in imp["skipped"].items()) or "none"
        lines.append(f"import {imp['source']}: {imp['events']} events (skipped: {skipped})")
    sel = report["selection"]
    removed = ", ".join(f"{k} {v}" for k, v in sel["removed"].items())
    lines.append(
        f"selection: kept {sel['kept']} (removed: {removed}; not run: {', '.join(sel['not_run']) or 'none'})"
    )
    sch = report["schedule"]
    lines.append(
        f"schedule: {sch['scheduled']} events, steps {sch['steps']}, no dates {sch['dropped_no_forecast_dates']}"
    )
    leak = report["leakage"]
    if leak["run"]:
        measured = leak.get("measured_on_labels")
        quality = (
            f"; rule '{leak.get('mode')}' measured on the hand-labelled sample: precision "
            f"{measured['precision']:.2f}, recall {measured['recall']:.2f}"
            if measured
            else ""
        )
        unseen = leak.get("measured_on_unseen_heldout")
        if measured and unseen:
            quality += (
                f"; on the second labelled set (data it was not tuned on, held-out part): precision "
                f"{unseen['precision']:.2f}, recall {unseen['recall']:.2f}"
            )
        lines.append(
            f"leakage screen: {leak['flagged_documents']} documents flagged in {leak['events_with_flags']} events{quality}"
        )
        for m in leak.get("labelled") or []:
            parts = "".join(
                f"; {name}: precision {p['precision']:.2f}, recall {p['recall']:.2f} ({p['true_flags']} of {p['flags']} flags, {p['positives']} leaks)"
                for name, p in (m.get("by_split") or {}).items()
            )
            lines.append(
                f"leakage screen ({m['rule']}) on {m['file']}: precision {m['precision']:.2f}, recall "
                f"{m['recall']:.2f} ({m['true_flags']} of {m['flags']} flags true, {m['positives']} leaks in "
                f"{m['pairs']} pairs; {m['not_rebuilt']} pairs not rebuilt){parts}"
            )
        judge_info = leak.get("judge")
        if judge_info:
            lines.append(
                f"leakage judge {judge_info['model']} ({judge_info['scope']}): {leak.get('judge_verdicts', 0)} verdicts "
                f"in decisions.jsonl, {judge_info['requests']} requests, {judge_info['cache_hits']} cached, "
                f"{judge_info['failures']} failed"
            )
        public = leak.get("outcome_public") or {}
        if public.get("run"):
            lines.append(
                f"outcome public before the last date: {public['truncated_events']} events truncated "
                f"({public['steps_removed']} steps removed), {public['events_left']} left with fewer than "
                f"{public['min_steps']} steps ({public['steps_of_events_left']} steps)"
            )
        else:
            lines.append(
                "outcome public before the last date: not checked (--keep-leaks or leakage.truncate_public off)"
            )
    else:
        lines.append("leakage screen: not run (no corpus)")
    for name in ("train", "eval"):
        stats = report["split"][name]
        lines.append(
            f"{name}: {stats['events']} events, outcomes {stats['outcomes']}, steps {stats['steps']}"
        )
    lines.append(f"neither split: {report['split']['neither']}")
    rates = report.get("outcome_rates")
    if rates:
        lines.append(describe_outcome_rates(rates))
        if rates.get("note"):
            lines.append(f"note: {rates['note']}")
    for warning in report.get("warnings") or []:
        lines.append(f"warning: {warning}")
    if report.get("decisions"):
        lines.append(f"decisions (decisions.jsonl): {report['decisions']}")
    leak = report.get("schedule_leak")
    if leak:
        for name, result in leak.items():
            lines.append(
                f"schedule leak ({name}): episode {describe(result['episode'])}; step {describe(result['step'])}"
            )
    return "\n".join(lines)


def render_markdown(report: dict[str, Any]) -> str:
    """A readable report: inputs, each stage's removals, split statistics and the flagged documents."""
    lines = ["# Events build report", "", "## Summary", "", "```", render_summary(report), "```", ""]
    lines += ["## Configuration", "", "```json", json.dumps(report["config"], indent=2), "```", ""]
    if report.get("corpus"):
        c = report["corpus"]
        lines += [
            "## Corpus",
            "",
            f"{c['documents']} documents, {c['available_from']} to {c['available_to']}, embedder {c['embedder']}, at `{c['path']}`.",
            "",
        ]
    lines += ["## Imports", ""]
    for imp in report["imports"]:
        lines += [f"### {imp['source']}: {imp['events']} events", ""]
        lines += _table(sorted(imp["skipped"].items()), ("skipped because", "count")) + [""]
        if imp["notes"]:
            lines += _table(sorted(imp["notes"].items()), ("repaired / noted", "count")) + [""]
    sel = report["selection"]
    lines += [
        "## Selection",
        "",
        f"Kept {sel['kept']} events. Not run: {', '.join(sel['not_run']) or 'none'}.",
        "",
    ]
    lines += _table(
        [(k, v, ", ".join(sel["removed_examples"].get(k, [])[:3])) for k, v in sel["removed"].items()],
        ("filter", "removed", "examples"),
    )
    sch = report["schedule"]
    lines += [
        "",
        "## Schedule",
        "",
        f"{sch['scheduled']} events scheduled; {sch['dropped_no_forecast_dates']} had no forecast date.",
        "",
    ]
    lines += _table(list(sch["steps"].items()), ("steps", "events"))
    lines += ["", "## Split", ""]
    for name in ("train", "eval"):
        stats = report["split"][name]
        lines += [f"### {name}: {stats['events']} events", ""]
        if stats["events"]:
            lines += [
                f"- outcomes: {stats['outcomes']}",
                f"- K outcomes: {stats['k_outcomes']}",
                f"- sources: {stats['sources']}",
                f"- horizon (days from first cutoff to close): {stats['horizon_days']}",
                f"- steps per event: {stats['steps']}",
                f"- first cutoff {stats['first_cutoff']}, last close {stats['last_close']}",
                "",
            ]
    lines += _table(list(report["split"]["neither"].items()), ("in neither split because", "events")) + [""]
    rates = report.get("outcome_rates")
    if rates:
        lines += ["### Outcome rate per split", "", describe_outcome_rates(rates) + ".", ""]
        lines += _table(
            [(name, json.dumps(rates[name]["by_label"], ensure_ascii=False)) for name in ("train", "eval")],
            ("split", "share of each realized outcome"),
        ) + [""]
        if rates.get("note"):
            lines += [f"**Note:** {rates['note']}.", ""]
    if report.get("schedule_leak"):
        lines += [
            "## Schedule leak",
            "",
            "Cross-validated AUC (95 % bootstrap interval) of a logistic model predicting the outcome from the "
            "schedule alone (`forecast_dojo.events.schedule_leak`): `episode` uses the number of steps, the last "
            "date against the open and the stated deadline, and the spacing; `step` what one step shows. "
            "0.5 means the schedule says nothing.",
            "",
        ]
        lines += _table(
            [
                (name, describe(result["episode"]), describe(result["step"]))
                for name, result in report["schedule_leak"].items()
            ],
            ("events", "episode features", "step features"),
        ) + [""]
    if report.get("sibling_leaks"):
        lines += [
            "## Cross-question leaks",
            "",
            "How often a question's answer is written in another question of the same split "
            "(`forecast_dojo.events.sibling_leak`):",
            "",
        ]
        lines += [
            f"- {name}: {describe_sibling_leaks(audit)}" for name, audit in report["sibling_leaks"].items()
        ]
        lines += [""]
    leak = report["leakage"]
    lines += ["## Leakage screen", ""]
    if not leak["run"]:
        lines += ["Not run (no corpus).", ""]
    else:
        lines += [
            f"{leak['flagged_documents']} documents flagged in {leak['events_with_flags']} events "
            f"({'excluded from those steps' if leak['excluded_from_episodes'] else 'listed only, not excluded'}).",
            "",
        ]
        if leak.get("labelled"):
            lines += ["### Precision and recall on labelled pairs", ""]
            rows_measured = []
            for m in leak["labelled"]:
                parts = [("all", m)] + list((m.get("by_split") or {}).items())
                rows_measured += [
                    (m["file"], part, m["rule"], p["pairs"], p["positives"], p["flags"], p["true_flags"],
                     f"{p['precision']:.2f}", f"{p['recall']:.2f}")
                    for part, p in parts
                ]  # fmt: skip
            lines += _table(
                rows_measured,
                ("labels", "part", "rule", "pairs", "leaks", "flags", "true flags", "precision", "recall"),
            ) + [""]
        public = leak.get("outcome_public") or {}
        if public.get("run"):
            lines += [
                "### Outcome public before the last forecast date",
                "",
                "The screen runs over the whole life of each event; its schedule ends before the first date at "
                f"which a flagged document is visible, and an event left with fewer than {public['min_steps']} "
                f"steps leaves the build. {public['truncated_events']} events truncated "
                f"({public['steps_removed']} steps removed); {public['events_left']} left.",
                "",
            ]
            if public["events"]:
                lines += _table(
                    [
                        (
                            p["event_id"],
                            p["first_public_date"],
                            p["public_since"],
                            ", ".join(p["doc_ids"]),
                            p["steps_removed"],
                            p["steps_kept"],
                            "yes" if p["leaves"] else "no",
                        )
                        for p in public["events"]
                    ],
                    (
                        "event",
                        "first date public",
                        "public since",
                        "documents",
                        "steps removed",
                        "steps kept",
                        "leaves",
                    ),
                ) + [""]
            lines += ["### Flagged documents", ""]
        rows = [
            (
                f["event_id"],
                f["doc_id"],
                f["first_step"],
                f["available_at"],
                ", ".join(f["resolution_terms"]),
                f["excerpt"][:120].replace("|", "/"),
            )
            for f in leak["flags"]
        ]
        lines += _table(
            rows, ("event", "document", "first step", "available at", "resolution terms", "excerpt")
        )
    dropped = report.get("dropped_questions") or []
    if dropped:
        lines += ["", f"## Dropped questions ({len(dropped)})", ""]
        lines += _table(
            [
                (
                    d["question"].replace("|", "/")[:140],
                    d["source"],
                    d["stage"],
                    (d["reason"] or d["rule"] or "").replace("|", "/"),
                    d["event_id"],
                )
                for d in dropped
            ],
            ("question", "source", "stage", "reason", "event"),
        )
    return "\n".join(lines) + "\n"
