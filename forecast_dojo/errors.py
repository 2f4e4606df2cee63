"""The package's error hierarchy: every error class of forecast_dojo lives here and derives from :class:`ForecastDojoError`.

Each concrete error also keeps a built-in base (``ValueError``, ``KeyError``, ``FileNotFoundError``,
``RuntimeError``, ``AssertionError``), so ``except ValueError`` and ``except KeyError`` clauses keep
working; a command-line front end catches ``ForecastDojoError`` alone. The modules that raise an error
re-export its class (``from forecast_dojo.schema import SchemaError`` keeps working).

Groups:

* configuration (``ConfigError`` and its subclasses): a value the caller chose (a constructor argument,
  a spec, a recipe, a command-line flag) that is unknown, out of range or inconsistent;
* input data (``SchemaError`` and its siblings): a file or record that does not have the documented shape;
* lookups (``NotFoundError``, a ``KeyError``) and missing files (``InputNotFoundError``, a ``FileNotFoundError``);
* state (``CorpusError``, ``StudyError``, ``EpisodeError``): a directory or an object that cannot do what is asked now;
* ``LeakageError``: text from at or after a cutoff was about to reach the agent (an ``AssertionError``: a bug).
"""

from __future__ import annotations


class ForecastDojoError(Exception):
    """Base of every error this library raises on purpose (bad input, data, configuration or leakage)."""


# --- configuration --------------------------------------------------------------------------------


class ConfigError(ForecastDojoError, ValueError):
    """A configuration value (argument, option, budget, name of a component) that is unknown or out of range."""


class SpecError(ConfigError):
    """A spec that cannot be used; the message names the file (or spec) and the key."""


class UsageError(ConfigError):
    """Command-line arguments that are out of range, unknown or cannot be used together."""


class BuildConfigError(ConfigError):
    """An events-build configuration file or value that does not match the documented options."""


class CleaningConfigError(ConfigError):
    """A cleaning recipe with an unknown stage or option, or a value of the wrong kind."""


class RecipeError(ConfigError):
    """A build recipe that names an unknown source, table or option."""


class WorldConfigError(ConfigError):
    """Generator parameters that cannot produce a valid world."""


class ResetError(ConfigError):
    """``env.reset`` options that cannot be honoured (unknown option, step out of range, bad notebook)."""


# --- input data -----------------------------------------------------------------------------------


class SchemaError(ForecastDojoError, ValueError):
    """A record that does not satisfy the documented schema; the message names the record and field."""


class RecordError(SchemaError):
    """A bad input record; ``reason`` is the short, countable part ("published_at: missing")."""

    def __init__(self, where: str, reason: str, detail: str = "") -> None:
        """Build the message ``"<where>: <reason> (<detail>)"``.

        Args:
            where: The file and row.
            reason: The short, countable reason.
            detail: Optional detail appended in parentheses.
        """
        super().__init__(f"{where}: {reason}{f' ({detail})' if detail else ''}")
        self.reason = reason


class ForecastBenchError(SchemaError):
    """A ForecastBench file that does not have the documented shape (names the file and record)."""


class PolymarketError(SchemaError):
    """An export file that does not have the documented shape (names the file and the record)."""


class InstantError(ForecastDojoError, ValueError):
    """A value that cannot be read as an instant."""


class RecordFormatError(ForecastDojoError, ValueError):
    """A step record that cannot be read (unknown version, missing or wrong fields)."""


class NotebookError(ForecastDojoError, ValueError):
    """A notebook that does not follow the schema; the message tells the agent what to fix."""


class UntrustedInputError(ForecastDojoError, ValueError):
    """A value from the agent that cannot be accepted; the message is meant for the agent."""


class SplitError(ForecastDojoError, ValueError):
    """Windows that are malformed or overlap, an unknown split name, or a split that the events lack."""


class OracleError(ForecastDojoError, ValueError):
    """An oracle file or request that cannot be honoured (bad rows, unknown events, naive cutoffs)."""


class ExportError(ForecastDojoError, ValueError):
    """Logs that cannot be exported as asked (unknown split, missing files, bad options)."""


class StrictBuildError(ForecastDojoError, ValueError):
    """A ``strict`` build stopped because a cleaning stage removed more than half of its input."""


class DataError(ForecastDojoError, ValueError):
    """Data that cannot serve the request (too few vectors for an index, no scored steps to compare)."""


# --- lookups and missing files --------------------------------------------------------------------


class NotFoundError(ForecastDojoError, KeyError):
    """A lookup by name or id that found nothing (a ``KeyError``; its text is the plain message)."""

    def __str__(self) -> str:
        """The message itself (``KeyError`` would print its repr, quotes and escapes included)."""
        return str(self.args[0]) if len(self.args) == 1 else super().__str__()


class UnknownEventError(NotFoundError):
    """An event id that the environment or world does not hold."""


class InputNotFoundError(ForecastDojoError, FileNotFoundError):
    """A file or folder the caller named that does not exist (the message names it)."""


class LogNotFoundError(ForecastDojoError, FileNotFoundError):
    """A path that is not a run directory, a ``steps.jsonl`` or a folder of run directories."""


class OutputExistsError(ForecastDojoError, FileExistsError):
    """An output that already exists and is not replaced unless asked (another run's log, a built events folder)."""


# --- state ----------------------------------------------------------------------------------------


class CorpusError(ForecastDojoError, RuntimeError):
    """A corpus directory that is missing, corrupted, or does not match what the caller expects."""


class StudyError(ForecastDojoError, RuntimeError):
    """A study folder that cannot be resumed as asked (another configuration's logs, missing inputs)."""


class ExperimentError(ForecastDojoError, RuntimeError):
    """An experiment folder that cannot continue as asked (another configuration), or bad experiment arguments."""


class StateError(ForecastDojoError, RuntimeError):
    """An object asked for something its current state cannot do (e.g. a gateway view without a retriever)."""


class LogLockedError(ForecastDojoError, RuntimeError):
    """Another writer (another process, or another writer in this one) holds the run directory's lock."""


class LogWriteError(ForecastDojoError, OSError):
    """Appending to a log failed (e.g. the disk is full); the file was left as it was before the write.

    Attributes:
        errno: The failed system call's error number (``errno.ENOSPC`` for a full disk), when known.
    """

    def __init__(self, message: str, errno: int | None = None) -> None:
        """Keep ``errno`` (``OSError(errno, message)``) when it is known.

        Args:
            message: What failed.
            errno: The system call's error number, or None.
        """
        super().__init__(*((errno, message) if errno is not None else (message,)))


class EpisodeError(StateError):
    """An episode used out of order (``step`` before ``reset``) or one that does not end within its turn limit."""


class ServeError(ForecastDojoError, RuntimeError):
    """A served environment refused a request (``forecast-dojo serve``); ``code`` is the server's error code.

    Attributes:
        code: OpenEnv's error code (``EXECUTION_ERROR``, ``CAPACITY_REACHED``, ...) or ``CONNECTION``.
    """

    def __init__(self, message: str, code: str = "EXECUTION_ERROR") -> None:
        """Keep the server's error ``code`` beside the message.

        Args:
            message: What the server said.
            code: The server's error code.
        """
        super().__init__(message)
        self.code = code


class CapacityError(ServeError):
    """The server already holds its maximum number of sessions (``--max-sessions``): retry later or add a server."""


class SessionClosedError(ServeError):
    """The server closed this session (idle past ``--idle-timeout``): reconnect to start a new one."""


class TransportError(ForecastDojoError, ConnectionError):
    """The WebSocket to a served environment failed or closed (the client maps it to :class:`ServeError`)."""


class TransportTimeoutError(ForecastDojoError, TimeoutError):
    """A served environment did not answer (or finish the handshake) in time."""


class SandboxUnavailableError(ForecastDojoError, OSError):
    """The python sandbox cannot run on this machine (missing libfaketime, unsupported architecture)."""


# --- leakage --------------------------------------------------------------------------------------


class LeakageError(ForecastDojoError, AssertionError):
    """Raised when text from at or after a cutoff is about to reach the agent. Never caught by the env."""


__all__ = [
    "BuildConfigError",
    "CapacityError",
    "CleaningConfigError",
    "ConfigError",
    "CorpusError",
    "DataError",
    "EpisodeError",
    "ExperimentError",
    "ExportError",
    "ForecastBenchError",
    "ForecastDojoError",
    "InputNotFoundError",
    "InstantError",
    "LeakageError",
    "LogLockedError",
    "LogNotFoundError",
    "LogWriteError",
    "NotFoundError",
    "NotebookError",
    "OracleError",
    "OutputExistsError",
    "PolymarketError",
    "RecipeError",
    "RecordError",
    "RecordFormatError",
    "ResetError",
    "SandboxUnavailableError",
    "SchemaError",
    "ServeError",
    "SessionClosedError",
    "SpecError",
    "SplitError",
    "StateError",
    "StrictBuildError",
    "StudyError",
    "TransportError",
    "TransportTimeoutError",
    "UnknownEventError",
    "UntrustedInputError",
    "UsageError",
    "WorldConfigError",
]
