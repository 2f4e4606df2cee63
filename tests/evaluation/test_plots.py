"""The report's figures are written as PNG files."""

from forecast_dojo.evaluation.plots import plot_report
from forecast_dojo.evaluation.report import build_report


def row(agent, memory, event_id, step, forecast, outcome=0):
    return {
        "agent": agent,
        "memory": memory,
        "event_id": event_id,
        "step": step,
        "n_steps": 3,
        "rollout": 0 if memory != "-" else None,
        "forecast": forecast,
        "outcome_index": outcome,
        "flags": [],
        "tool_calls_by_kind": {"search": 2} if memory == "none" else {"search": 1},
        "tokens": {"prompt_tokens": 10, "completion_tokens": 3},
    }


def test_plot_report_writes_every_figure(tmp_path):
    rows = []
    for i in range(3):
        for step in range(3):
            rows.append(row("a", "none", f"e{i}", step, [0.7, 0.3], outcome=i % 2))
            rows.append(row("a", "notebook", f"e{i}", step, [0.8, 0.2], outcome=i % 2))
            rows.append(row("market", "-", f"e{i}", step, [0.6, 0.4], outcome=i % 2))
    written = plot_report(rows, build_report(rows), tmp_path)
    assert written == ["reliability.png", "life.png", "memory_gain.png", "cost.png"]
    for name in written:
        assert (tmp_path / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
