"""The report's figures are written as PNG files, readable, one colour per forecaster in all of them."""

import re

import pytest

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


def capture(monkeypatch):
    """Record every figure's axes (labels, titles, line/bar colours) as plot_report saves it."""
    from matplotlib.colors import to_hex

    from forecast_dojo.evaluation import plots

    figures = {}
    save = plots._save

    def spy(fig, out, name):
        figures[name] = {
            "suptitle": fig._suptitle.get_text() if fig._suptitle else "",
            "axes": [
                {
                    "title": ax.get_title(),
                    "ylabel": ax.get_ylabel(),
                    "visible": ax.axison,
                    # a line drawn over an identical one is labelled "name (= other)", a near one "(≈ other)"
                    "lines": {
                        re.split(" \\((?:=|≈) ", line.get_label())[0]: to_hex(line.get_color())
                        for line in ax.get_lines()
                    },
                    "labels": [line.get_label() for line in ax.get_lines()],
                    "bars": [to_hex(p.get_facecolor()) for p in ax.patches],
                    "texts": [t.get_text() for t in ax.texts],
                    "scatter_sizes": [list(c.get_sizes()) for c in ax.collections],
                    "tick_pt": [t.get_fontsize() for t in ax.get_xticklabels() + ax.get_yticklabels()],
                }
                for ax in fig.axes
            ],
        }
        return save(fig, out, name)

    monkeypatch.setattr(plots, "_save", spy)
    return figures


def study(tokens):
    rows = []
    for i in range(3):
        for step in range(3):
            for memory, forecast in (("none", [0.7, 0.3]), ("notebook", [0.8, 0.2])):
                for agent in ("a", "b"):
                    r = row(agent, memory, f"e{i}", step, forecast, outcome=i % 2)
                    r["tokens"] = {"prompt_tokens": 10, "completion_tokens": 3} if tokens else {}
                    rows.append(r)
            for reference in ("market", "oracle", "uniform"):
                rows.append(row(reference, "-", f"e{i}", step, [0.6, 0.4], outcome=i % 2) | {"tokens": {}})
    return rows


def test_reliability_is_one_panel_per_forecaster_with_bin_counts(tmp_path, monkeypatch):
    figures = capture(monkeypatch)
    rows = study(tokens=True)
    report = build_report(rows)
    plot_report(rows, report, tmp_path)
    panels = [ax for ax in figures["reliability.png"]["axes"] if ax["title"]]
    names = ["a/none", "a/notebook", "b/none", "b/notebook", "market", "oracle"]  # uniform omitted
    assert [p["title"].split(" (")[0] for p in panels] == names
    for panel in panels:
        name = panel["title"].split(" (")[0]
        points = report["reliability"][name if "/" in name else f"{name}/-"]
        assert panel["title"].endswith(f"(n = {sum(p['count'] for p in points)})")
        counts = [p["count"] for p in points]
        # marker area grows with the bin's count
        assert panel["scatter_sizes"][0] == pytest.approx([12 + 140 * c / max(counts) for c in counts])
    strips = [ax for ax in figures["reliability.png"]["axes"] if not ax["title"] and ax["bars"]]
    assert len(strips) == len(names)
    assert all(strip["texts"] and all(t.isdigit() for t in strip["texts"]) for strip in strips)


def test_cost_has_no_empty_tokens_axis_without_token_counts(tmp_path, monkeypatch):
    figures = capture(monkeypatch)
    rows = study(tokens=False)
    plot_report(rows, build_report(rows), tmp_path)
    cost = figures["cost.png"]
    assert [ax["ylabel"] for ax in cost["axes"]] == ["research tool calls per step"]
    assert "no token counts logged" in cost["suptitle"]
    rows = study(tokens=True)
    plot_report(rows, build_report(rows), tmp_path)
    assert [ax["ylabel"] for ax in figures["cost.png"]["axes"]] == [
        "research tool calls per step",
        "tokens per step (prompt + completion)",
    ]
    assert all(min(ax["tick_pt"]) >= 8 for ax in figures["cost.png"]["axes"])  # readable tick labels


def test_a_forecaster_has_one_colour_in_every_figure(tmp_path, monkeypatch):
    from forecast_dojo.evaluation.plots import forecaster_colours

    figures = capture(monkeypatch)
    rows = study(tokens=True)
    plot_report(rows, build_report(rows), tmp_path)
    life = figures["life.png"]["axes"][0]["lines"]
    cost = figures["cost.png"]["axes"][0]["bars"]  # a/none, a/notebook, b/none, b/notebook
    assert cost == [life["a/none"], life["a/notebook"], life["b/none"], life["b/notebook"]]
    assert len(set(cost)) == 4
    reliability = {
        ax["title"].split(" (")[0]: set(ax["lines"].values()) - {"#000000"}
        for ax in figures["reliability.png"]["axes"]
        if ax["title"]
    }
    for name in ("a/none", "b/notebook", "oracle"):
        assert reliability[name] == {life[name]}
    # b plays exactly as a: its lines say so, thinner on top of a's
    assert "b/none (= a/none)" in figures["life.png"]["axes"][0]["labels"]
    gain = figures["memory_gain.png"]["axes"][0]["lines"]
    assert gain["a (notebook - none)"] == life["a/notebook"]
    # references keep their colour whatever the agents are; agents' colours depend only on the names
    assert forecaster_colours(["market", "x/none"])["market"] == forecaster_colours(["market"])["market"]
    assert forecaster_colours(["b/none", "a/none"]) == forecaster_colours(["a/none", "b/none"])


def test_figures_from_a_report_json_match_the_rows_figures(tmp_path, monkeypatch):
    import json

    from forecast_dojo.evaluation.plots import figures_from_report
    from forecast_dojo.evaluation.report import _jsonable

    figures = capture(monkeypatch)
    rows = study(tokens=False)
    report = build_report(rows)
    (tmp_path / "rows").mkdir()
    plot_report(rows, report, tmp_path / "rows")
    from_rows = dict(figures)
    stored = json.loads(json.dumps(_jsonable(report)))  # as report.json holds it
    (tmp_path / "json").mkdir()
    assert figures_from_report(stored, tmp_path / "json") == ["reliability.png", "life.png", "cost.png"]
    for name in ("reliability.png", "life.png", "cost.png"):
        assert figures[name] == from_rows[name]
        assert (tmp_path / "json" / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_lines_that_coincide_on_the_plot_name_the_line_beneath(tmp_path, monkeypatch):
    """0.0001 apart is invisible on the life figure: the upper line says it is near the one beneath."""
    from forecast_dojo.evaluation import plots

    figures = capture(monkeypatch)
    thirds = plots.metrics.THIRDS
    report = {
        "life_thirds": [
            {"agent": agent, "memory": memory, "slice": third, "brier": value + offset}
            for agent, memory, offset in (("a", "none", 0.0), ("a", "notebook", 1e-4), ("b", "none", 0.0))
            for third, value in zip(thirds, (0.4, 0.3, 0.2), strict=True)
        ]
    }
    plots._life(plots._plt(), report, {}, tmp_path)
    labels = figures["life.png"]["axes"][0]["labels"]
    assert labels == ["a/none", "a/notebook (≈ a/none)", "b/none (= a/none)"]
