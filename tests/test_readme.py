"""The README's examples run as written: every command parses, and the cheap ones run (instant embedder).

The SFT recipe block is run by ``tests/training/test_sft.py``; the first command's job by
``tests/evaluation/test_cli.py::test_run_twice_in_a_row_reuses_the_logs``.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

import forecast_dojo
from forecast_dojo import registration
from forecast_dojo.cli import build_parser

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
FAST = ["--embedder", "hashing", "--no-python"]  # what every run below adds: the instant embedder, no sandbox
SCRIPTS = {
    "python training/sft.py": "sft",
    "python training/grpo.py": "grpo",
}  # the same flags as these commands


def blocks(language: str) -> list[str]:
    """The README's fenced code blocks in ``language``."""
    return re.findall(rf"^```{language}\n(.*?)^```", README.read_text(), flags=re.S | re.M)


def shell_lines() -> list[str]:
    """Every command line of the bash blocks: continuations joined, comments dropped."""
    lines = []
    for block in blocks("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not line.startswith("#"):
                lines.append(line)
    return lines


def commands() -> list[list[str]]:
    """``forecast-dojo`` argument lists of the README (each ``&&`` / ``|`` segment; scripts as their commands)."""
    found = []
    for line in shell_lines():
        for segment in re.split(r"&&|\|", line):
            segment = re.sub(r"\s#.*$", "", segment).split(">")[0].strip()
            for script, command in SCRIPTS.items():
                if segment.startswith(script):
                    segment = f"forecast-dojo {command}" + segment[len(script) :]
            if segment.startswith("forecast-dojo"):
                found.append(shlex.split(segment)[1:])
    return found


def test_the_readme_has_the_commands_this_test_reads():
    jobs = {argv[0] for argv in commands()}
    assert {"run", "report", "export", "corpus", "events", "sft", "grpo"} <= jobs, jobs


@pytest.mark.parametrize("argv", commands(), ids=" ".join)
def test_every_readme_command_parses(argv):
    build_parser().parse_args(argv)  # argparse exits (status 2) on an unknown flag or a bad value


def play_readme_shell(command: str, cwd: Path, cache: Path) -> subprocess.CompletedProcess[str]:
    """Run one README shell line with ``forecast-dojo`` being this checkout's, every ``run`` with :data:`FAST`."""
    executable = f"{shlex.quote(sys.executable)} -m forecast_dojo.cli"
    parts = command.split("|")
    parts = [
        re.sub(r"^\s*forecast-dojo (run .*?)\s*$", rf"{executable} \1 {' '.join(FAST)} ", part)
        for part in parts
    ]
    env = dict(os.environ, FORECAST_DOJO_CACHE=str(cache))
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        "|".join(parts), shell=True, cwd=cwd, env=env, capture_output=True, text=True, timeout=900
    )


@pytest.mark.slow
def test_the_single_step_example_runs_as_written(synthetic_cache, tmp_path):
    lines = [line for line in shell_lines() if "--step" in line]
    assert len(lines) == 2 and "> nb.json" in lines[0] and "--notebook nb.json" in lines[1]
    first = play_readme_shell(lines[0], tmp_path, synthetic_cache)
    assert first.returncode == 0, first.stderr[-3000:]
    notebook = (tmp_path / "nb.json").read_text()
    assert '"assessment"' in notebook
    second = play_readme_shell(lines[1], tmp_path, synthetic_cache)
    assert second.returncode == 0, second.stderr[-3000:]
    record = second.stdout.strip().splitlines()[-1]
    assert '"step": 3' in record and '"mode": "notebook"' in record


@pytest.mark.slow
def test_the_rl_loop_block_runs_as_written(synthetic_cache, monkeypatch):
    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    monkeypatch.chdir(REPO)  # the block's spec path is relative to the repository root
    make = registration.make

    def instant(*args, **overrides):  # the block as written, on the instant embedder without the sandbox
        overrides.setdefault("embedder", "hashing")
        overrides.setdefault("python_runner", None)
        return make(*args, **overrides)

    monkeypatch.setattr(registration, "make", instant)  # gym.make's entry point
    monkeypatch.setattr(forecast_dojo, "make", instant)
    (block,) = [b for b in blocks("python") if 'gym.make("forecast_dojo/Synthetic-v0"' in b]
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)
    assert namespace["done"] and namespace["record"].event_id == "syn-0006"
    assert namespace["obs"]["event_id"] == "syn-0006"  # the spec file's env, reset by positional id
    assert [t["function"]["name"] for t in namespace["env"].tool_schemas()][-1] == "submit_forecast"
    assert {e.id for e in namespace["held_out"].events} == {f"syn-{i:04d}" for i in range(1, 40, 2)}


@pytest.mark.slow
def test_the_world_mode_block_runs_as_written(synthetic_cache, monkeypatch, capsys):
    from forecast_dojo.world import registration as world_registration

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    make_world = world_registration.make_world

    def instant(*args, **overrides):  # the block as written, on the instant embedder without the sandbox
        overrides.setdefault("embedder", "hashing")
        overrides.setdefault("python_runner", None)
        return make_world(*args, **overrides)

    monkeypatch.setattr(world_registration, "make_world", instant)  # gym.make's entry point
    (block,) = [b for b in blocks("python") if 'gym.make("forecast_dojo/SyntheticSim-v0"' in b]
    namespace: dict = {}
    exec(compile(block, str(README), "exec"), namespace)
    env, info = namespace["env"], namespace["info"]
    assert namespace["done"] and env.unwrapped.memory == "files"
    calendar = env.unwrapped.calendar
    assert {e.id for e in calendar.events} == {f"syn-{i:04d}" for i in range(0, 40, 2)}  # the train split
    assert set(info["scores"]) == {e.id for e in calendar.events}
    assert all(
        list(info["scores"][e.id]) == [d.isoformat() for d in calendar.open_days(e.id)]
        for e in calendar.events
    )
    assert sum(v for days in info["scores"].values() for v in days.values()) > 0  # it forecast, and scored
    assert str(info["scores"])[:40] in capsys.readouterr().out


def layout_rows() -> dict[str, str]:
    """The README's layout table: each folder cell (a cell may name several, ``a/``, ``b/``) -> its description."""
    section = README.read_text().split("## Layout", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            for folder in re.findall(r"`([^`]+)/`", cells[0]):
                rows[folder] = cells[1]
    return rows


def test_the_layout_table_matches_the_tree():
    """Every top-level folder of the repository has a row, every row names a folder that exists, and every
    module and subpackage the library's row names (in backticks) exists, each subpackage named.
    """
    rows = layout_rows()
    folders = {p.name for p in REPO.iterdir() if p.is_dir() and not p.name.startswith((".", "_"))}
    folders -= {"build", "dist", "runs", "forecast_dojo.egg-info"}  # outputs, never tracked
    folders = {f for f in folders if any(f == path.split("/")[0] for path in _tracked())}
    assert folders <= set(rows), f"folders without a layout row: {sorted(folders - set(rows))}"
    assert all((REPO / folder).is_dir() for folder in rows), [f for f in rows if not (REPO / f).is_dir()]
    package = REPO / "forecast_dojo"
    named = set(re.findall(r"`([a-z_]+)`", rows["forecast_dojo"])) | set(
        re.findall(r"`([a-z_]+)/`", rows["forecast_dojo"])
    )
    for name in sorted(named):
        exists = (package / f"{name}.py").exists() or (package / name / "__init__.py").exists()
        exists = exists or any(package.glob(f"*/{name}.py"))  # a module of a subpackage: `runner`, `split`
        exists = exists or hasattr(registration, name)  # `make`, `register`: the registration functions
        assert exists, f"the layout table names forecast_dojo's {name!r}, which does not exist"
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")} - {"envs"}
    assert subpackages <= named, f"subpackages the layout table does not name: {sorted(subpackages - named)}"


def _tracked() -> list[str]:
    """The repository's tracked files (the tree's folders as git sees them); every folder when git is absent."""
    try:
        out = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return [p.name for p in REPO.iterdir()]
    return out.splitlines()


@pytest.mark.slow
def test_the_serving_blocks_run_as_written(synthetic_cache, monkeypatch, capsys):
    """The server + client block against a server of the shipped world, then the verifiers block."""
    pytest.importorskip("openenv")
    from forecast_dojo.integrations.openenv import BackgroundServer, create_app

    monkeypatch.setenv("FORECAST_DOJO_CACHE", str(synthetic_cache))
    make = registration.make

    def instant(*args, **overrides):  # as written, on the instant embedder without the sandbox
        overrides.setdefault("embedder", "hashing")
        overrides.setdefault("python_runner", None)
        return make(*args, **overrides)

    monkeypatch.setattr(registration, "make", instant)
    (client_block,) = [b for b in blocks("python") if "ForecastDojoClient(base_url=" in b]
    with BackgroundServer(create_app(lambda: instant("Synthetic-v0", split="train"))) as server:
        exec(compile(client_block.replace("http://127.0.0.1:8000", server.url), str(README), "exec"), {})
    scores = capsys.readouterr().out.strip().splitlines()
    assert scores and all(line.startswith("[") for line in scores)  # flags and the step's score, every step
    pytest.importorskip("verifiers.v1")
    (verifiers_block,) = [b for b in blocks("python") if "load_environment(" in b]
    namespace: dict = {}
    exec(compile(verifiers_block, str(README), "exec"), namespace)
    train = instant("Synthetic-v0", split="train")
    assert len(namespace["tasks"]) == sum(e.n_steps for e in train.events)
    assert capsys.readouterr().out.split()[1] == f"{train.events[0].id}@0"
