"""One error hierarchy: every error class lives in ``forecast_dojo.errors``; library code raises its subclasses."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
from pathlib import Path

import pytest

from forecast_dojo import errors
from forecast_dojo.errors import ForecastDojoError

PACKAGE = Path(__file__).resolve().parent.parent / "forecast_dojo"

# (module path, builtin) pairs where Python's contract wants the builtin exception.
ALLOWED_BUILTIN_RAISES = {
    ("corpus/bm25.py", "KeyError"),  # Vocabulary.__getitem__: the mapping protocol
    ("corpus/store.py", "IndexError"),  # sequence __getitem__ out of range
    ("events/build.py", "TypeError"),  # override() called on something that is not a config dataclass
    ("agents/base.py", "NotImplementedError"),  # abstract method
    ("sandbox.py", "OSError"),  # the seccomp program builder's own jump-range check (a bug, never input)
    ("trajectory.py", "OSError"),  # a short write() of 0 bytes: an I/O failure, as os.write has it
    ("tools.py", "TypeError"),  # generated tool methods called wrongly: Python's call contract
}

# a missing optional extra is an ImportError, as Python has it; StopIteration ends an iterator
ANYWHERE = {"ModuleNotFoundError", "ImportError", "StopIteration"}

# Re-exports kept so that old imports keep working.
MOVED = {
    "forecast_dojo.schema": ["SchemaError"],
    "forecast_dojo.corpus.importers.generic": ["RecordError"],
    "forecast_dojo.corpus.cleaning": ["CleaningConfigError"],
    "forecast_dojo.corpus.store": ["CorpusError"],
    "forecast_dojo.corpus.pipeline": ["RecipeError", "StrictBuildError"],
    "forecast_dojo.synthetic.model": ["WorldConfigError"],
    "forecast_dojo.synthetic.oracle": ["OracleError"],
    "forecast_dojo.registration": ["SpecError"],
    "forecast_dojo.records": ["RecordFormatError"],
    "forecast_dojo.evaluation.study": ["StudyError"],
    "forecast_dojo.training.export": ["ExportError"],
    "forecast_dojo.untrusted": ["UntrustedInputError"],
    "forecast_dojo.events.polymarket": ["PolymarketError"],
    "forecast_dojo.events.split": ["SplitError"],
    "forecast_dojo.events.forecastbench": ["ForecastBenchError"],
    "forecast_dojo.events.build": ["BuildConfigError"],
    "forecast_dojo.notebook": ["NotebookError"],
    "forecast_dojo.gateway": ["LeakageError"],
    "forecast_dojo.timeutil": ["InstantError"],
    "forecast_dojo.trajectory": ["LogLockedError", "LogNotFoundError", "LogWriteError"],
}

BUILTIN_EXCEPTIONS = {
    name for name, obj in vars(builtins).items() if inspect.isclass(obj) and issubclass(obj, BaseException)
}


def test_no_error_class_is_defined_outside_errors_py():
    defined = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.name == "errors.py" and path.parent == PACKAGE:
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b) for b in node.bases}
                exception_bases = {b for b in bases & BUILTIN_EXCEPTIONS if not b.endswith("Warning")}
                if node.name.endswith(("Error", "Exception")) or exception_bases:
                    defined.append(f"{path.relative_to(PACKAGE)}:{node.lineno} {node.name}")
    assert defined == []


def test_library_raises_only_its_own_errors_except_where_python_wants_a_builtin():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Raise) and node.exc is not None:
                target = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                name = ast.unparse(target)
                if name in BUILTIN_EXCEPTIONS - ANYWHERE and (rel, name) not in ALLOWED_BUILTIN_RAISES:
                    found.append(f"{rel}:{node.lineno} raise {name}")
    assert found == []


def test_every_class_in_errors_derives_from_the_base_and_keeps_a_builtin_base():
    classes = [
        obj for obj in vars(errors).values() if inspect.isclass(obj) and obj.__module__ == errors.__name__
    ]
    assert len(classes) >= 30
    assert sorted(errors.__all__) == sorted(c.__name__ for c in classes)
    for cls in classes:
        assert issubclass(cls, ForecastDojoError)
        if cls is not ForecastDojoError:
            assert any(
                issubclass(cls, b) for b in (ValueError, LookupError, OSError, RuntimeError, AssertionError)
            )


@pytest.mark.parametrize("module", sorted(MOVED))
def test_old_import_paths_give_the_same_classes(module):
    imported = importlib.import_module(module)
    for name in MOVED[module]:
        assert getattr(imported, name) is getattr(errors, name)


def test_a_not_found_error_prints_its_message_not_its_repr():
    err = errors.UnknownEventError("unknown event id 'x' (3 events in this environment)")
    assert isinstance(err, KeyError)
    assert str(err) == "unknown event id 'x' (3 events in this environment)"


def test_record_error_keeps_its_countable_reason():
    err = errors.RecordError("a.jsonl:3", "published_at: missing", "row 3")
    assert str(err) == "a.jsonl:3: published_at: missing (row 3)" and err.reason == "published_at: missing"
    assert isinstance(err, errors.SchemaError) and isinstance(err, ValueError)


def test_env_reset_and_step_raise_the_library_errors(make_tiny_env):
    env = make_tiny_env(memory="notebook")
    with pytest.raises(errors.EpisodeError, match="reset"):
        env.step("anything")  # before reset
    with pytest.raises(errors.UnknownEventError, match="unknown event id 'nope'") as unknown:
        env.reset("nope")
    assert isinstance(unknown.value, KeyError) and str(unknown.value).startswith("unknown event id 'nope'")
    for options, match in (
        ({"evnt_id": "harbor"}, "unknown reset options"),
        ({"step": 3}, "step"),
        ({"step": 0, "notebook": {"assessment": {}}}, "notebook"),
        ({"rollout": -1}, "rollout"),
    ):
        with pytest.raises(errors.ResetError, match=match):
            env.reset("harbor", options=options)
    with pytest.raises(errors.ResetError, match="memory='notebook'"):
        make_tiny_env(memory="none").reset("harbor", options={"notebook": {}})
