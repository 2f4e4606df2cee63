"""Notebook validation."""

from datetime import date

import pytest

from forecast_dojo.notebook import MAX_NOTEBOOK_CHARS, NotebookError, parse_notebook

OUTCOMES = ("A", "B", "C")


def test_valid_notebook_round_trips_in_outcome_order():
    notebook = parse_notebook(
        '{"assessment": {"C": 0.2, "A": 0.5, "B": 0.3}, "evidence": [{"claim": "poll", "date": "2030-01-02", "doc_ids": ["d1"]}]}',
        OUTCOMES,
        forecast_date=date(2030, 1, 3),
    )
    assert notebook.to_dict()["assessment"] == {"A": 0.5, "B": 0.3, "C": 0.2}
    assert list(notebook.to_dict()["assessment"]) == ["A", "B", "C"]
    assert notebook.evidence[0].doc_ids == ("d1",)


def test_size_cap():
    evidence = [{"claim": "x" * 490, "date": "2030-01-01", "doc_ids": []} for _ in range(30)]
    with pytest.raises(NotebookError, match=str(MAX_NOTEBOOK_CHARS)):
        parse_notebook({"assessment": {"A": 1, "B": 0, "C": 0}, "evidence": evidence}, OUTCOMES)


@pytest.mark.parametrize(
    "value",
    [
        [],
        {"assessment": {"A": 1.0, "B": 0.0}},
        {"assessment": {"A": float("nan"), "B": 0.5, "C": 0.5}},
        {"assessment": {"A": 1, "B": 0, "C": 0}, "evidence": "lots"},
        {"assessment": {"A": 1, "B": 0, "C": 0}, "evidence": [{"claim": "x", "date": "yesterday"}]},
        {
            "assessment": {"A": 1, "B": 0, "C": 0},
            "evidence": [{"claim": "x", "date": "2030-01-01", "doc_ids": "d1"}],
        },
        {"assessment": {"A": 1, "B": 0, "C": 0}, "open_questions": [1, 2]},
    ],
)
def test_malformed(value):
    with pytest.raises(NotebookError):
        parse_notebook(value, OUTCOMES)


def test_an_assessment_reads_its_labels_as_a_submitted_forecast_does():
    notebook = parse_notebook({"assessment": {" A": 0.5, "B ": 0.3, "C": 0.2}}, OUTCOMES)
    assert notebook.to_dict()["assessment"] == {"A": 0.5, "B": 0.3, "C": 0.2}
    with pytest.raises(NotebookError, match="named twice"):
        parse_notebook({"assessment": {"A": 0.5, " A": 0.3, "B": 0.1, "C": 0.1}}, OUTCOMES)
    with pytest.raises(NotebookError, match="unknown: \\['a'\\]"):
        parse_notebook({"assessment": {"a": 0.5, "B": 0.3, "C": 0.2}}, OUTCOMES)


def test_an_assessment_left_out_is_the_forecast_given():
    notebook = parse_notebook(
        {"evidence": [{"claim": "poll", "date": "2030-01-02", "doc_ids": ["d1"]}]},
        OUTCOMES,
        forecast={"A": 0.5, "B": 0.3, "C": 0.2},
    )
    assert notebook.to_dict()["assessment"] == {"A": 0.5, "B": 0.3, "C": 0.2}
    assert notebook.evidence[0].claim == "poll"


def test_an_assessment_given_is_checked_never_replaced_by_the_forecast():
    forecast = {"A": 0.5, "B": 0.3, "C": 0.2}
    kept = parse_notebook({"assessment": {"A": 0.1, "B": 0.1, "C": 0.8}}, OUTCOMES, forecast=forecast)
    assert kept.to_dict()["assessment"] == {"A": 0.1, "B": 0.1, "C": 0.8}
    with pytest.raises(NotebookError, match="sum"):  # the binary habit on a three-outcome question
        parse_notebook({"assessment": {"A": 0.5, "B": 0.5, "C": 0.5}}, OUTCOMES, forecast=forecast)


def test_an_assessment_left_out_without_a_forecast_is_refused():
    with pytest.raises(NotebookError, match="assessment is missing"):
        parse_notebook({"evidence": []}, OUTCOMES)


def test_notebook_value_without_an_assessment_leaves_the_key_out():
    from forecast_dojo.notebook import notebook_value

    claims = [{"claim": "poll", "date": "2030-01-02", "doc_ids": ["d1"]}]
    assert notebook_value(None, claims) == {"evidence": claims}
    assert notebook_value(None, claims, ["when?"]) == {"evidence": claims, "open_questions": ["when?"]}
    assert list(notebook_value({"A": 1.0}, claims)) == ["assessment", "evidence", "open_questions"]
