"""Model runtimes: how a model input is run, found by name in the ``certa.runtimes`` entry-point group.

A stage that evaluates models (``model.windows``, the ``hf_models`` scorer of ``sequential.diff``) never imports
torch or an HTTP client: it asks the runtime of each model input for what it needs, through the protocol below.
The runtime of an input is chosen by the input's format (``runtime_for``): a runtime declares the formats it runs,
and exactly one registered runtime must run a given format (certa's own ``hf`` runs ``hf-model``, a local model
folder: ``certa.engine.core.runtimes.hf``). A package registers a runtime in its own metadata, as certa registers
its own, e.g. in ``pyproject.toml``::

    [project.entry-points."certa.runtimes"]
    my_runtime = "my_package.runtime:MyRuntime"

The entry point's object is a factory with an attribute ``formats`` (the input formats it runs, e.g.
``("endpoint",)``), called as ``factory(table, device=..., dtype=..., threads=...)``: ``table`` is the model input
(``certa.engine.core.tables.Table``), the keywords are what the stage's knobs ask (``device`` ``cpu`` or ``cuda``,
``dtype`` the compute dtype, ``threads`` the intra-op threads); a runtime that cannot honour one refuses it with an
error naming it, never ignores it. The call does the cheap part and returns a ``Runtime``, the model *prepared*:
its files or declaration checked, its tokenizer read, nothing heavy held. ``Runtime.open()`` then does the heavy
part (loads the weights, or connects to a server) and returns an ``OpenRuntime``, which scores; ``close()`` (or
leaving its ``with`` block) frees it. Two phases, because ``model.windows`` checks both models before it loads
either, then loads one at a time so that memory holds one model's weights.

``Runtime`` (prepared):

* ``name``: the input's name; ``sha256``: the input's SHA-256 (a folder's manifest, an endpoint's declaration);
* ``tokenizer``: a ``tokenizers.Tokenizer`` (with the post-processor that adds a family's special tokens), or None;
  ``tokenizer_sha256``: the SHA-256 of its ``tokenizer.json`` (None without one): two models share tokens when
  these are equal;
* ``positions``: the most tokens one sequence may hold (0: no stated limit); ``vocabulary``: token ids 0 ..
  vocabulary - 1 are the model's (0: unknown); ``resident``: True when its weights are already in memory (a stage
  opens it first);
* ``first_token()``: the token a sequence starts with when the text brings none (beginning of sequence, else end
  of sequence), or an ``InputError`` naming the input when the model has neither;
* ``check_token_ids(ids, text)``: an ``InputError`` when an id of ``ids`` is not the model's (``text`` says what was
  tokenized);
* ``open() -> OpenRuntime``.

``OpenRuntime`` (a context manager; teacher forcing: x_0 .. x_n a sequence of token ids, x_0 unscored):

* ``window_nll(windows, *, batch_size, progress=None)``: for each window of a
  ``certa.engine.core.models.windows.Windows`` (input ``flat[start: start + length]``, its last ``targets`` tokens
  scored), Σ −ln p(x_t | x_<t) over its targets, in nats, as a float64 array in window order;
* ``token_logprobs(sequences)``: for each sequence, ln p(x_t | x_0 .. x_{t-1}) for t = 1 .. n (one float64 array
  of n numbers per sequence, in order), the sequence fed as it is (no token added or dropped);
* optional ``next_token_logprobs(sequences)``: for each sequence, the full next-token log-distributions at
  positions 1 .. n (an (n, vocabulary) float64 array per sequence; row t-1 is ln p(· | x_<t)): an open runtime
  with it is a ``DistributionRuntime``. A served model does not return them, so its runtime has no such method, and
  a metric that needs them (``sym_kl``) refuses it;
* ``describe()``: the model's identity for the certificate, JSON-able: ``kind`` (``local`` or ``endpoint``),
  ``input``, ``sha256``, ``model_type``, ``parameters`` (0 when unknown), ``tokenizer_sha256``,
  ``special_tokens`` (``{"before": [...], "after": [...]}``), ``signature`` (the input's signature check),
  ``claims`` (what a server says about itself, kept apart from what certa verified; empty for a local model),
  ``device``, ``dtype``, ``libraries`` (versions);
* ``usage()``: what it has spent so far, named counts >= 0 (``forward_passes``, ``model_calls``, ``tokens``;
  ``requests`` for a server); ``evidence()``: the tables it captured (a served model's transcripts), by name;
  none for a local model;
* ``close()``.

Every number is deterministic: the same inputs give the same bits on one machine, whatever the batch a sequence or
window shares (no padding enters a computation), and a value that is not finite is an ``InputError`` naming the
input, never returned. docs/runtimes.md says the same with the HF runtime as the worked example.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping, Sequence
from importlib.metadata import EntryPoint, entry_points
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from certa.engine.foundation.errors import StageError
from certa.engine.core.tables import Table

if TYPE_CHECKING:
    from certa.engine.core.models.windows import ScoreProgress, Windows

__all__ = ["ENTRY_POINT_GROUP", "BorrowsTokenizer", "Runtime", "OpenRuntime", "DistributionRuntime", "RuntimeFactory",
           "available_runtimes", "load_runtime", "runtime_for"]

ENTRY_POINT_GROUP = "certa.runtimes"


@runtime_checkable
class OpenRuntime(Protocol):
    """A model ready to score (module docstring)."""

    def window_nll(self, windows: Windows, *, batch_size: int, progress: ScoreProgress | None = None) -> np.ndarray:
        """Each window's summed NLL of its targets (nats, float64)."""
        ...

    def token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(x_t | x_<t) for t = 1 .. n of each sequence (float64)."""
        ...

    def describe(self) -> Mapping[str, Any]:
        """The model's identity for the certificate."""
        ...

    def usage(self) -> dict[str, int]:
        """Named counts of what it has spent so far."""
        ...

    def evidence(self) -> Mapping[str, Table]:
        """The tables it captured, by name."""
        ...

    def close(self) -> None:
        """Free what ``open`` took."""
        ...

    def __enter__(self) -> OpenRuntime:
        ...

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        ...


@runtime_checkable
class DistributionRuntime(OpenRuntime, Protocol):
    """An open runtime that also gives full next-token distributions (``next_token_logprobs``: module docstring)."""

    def next_token_logprobs(self, sequences: Sequence[Sequence[int]]) -> list[np.ndarray]:
        """ln p(. | x_<t) for t = 1 .. n of each sequence: an (n, vocabulary) float64 array per sequence."""
        ...


@runtime_checkable
class Runtime(Protocol):
    """A model input prepared to run (module docstring)."""

    name: str
    sha256: str
    tokenizer: Any
    tokenizer_sha256: str | None
    positions: int
    vocabulary: int
    resident: bool

    def first_token(self) -> int:
        """The token a sequence starts with when the text brings none."""
        ...

    def check_token_ids(self, ids: np.ndarray, text: str) -> None:
        """An ``InputError`` when an id is not the model's."""
        ...

    def open(self) -> OpenRuntime:
        """Load the weights or connect: the model, ready to score."""
        ...


@runtime_checkable
class BorrowsTokenizer(Protocol):
    """A runtime that has no tokenizer of its own to read (a served model): it scores the tokens of a partner's
    tokenizer (the stage's local reference), and checks, when it opens, that its server produces the same ids; or,
    when both models are served, the tokens its own server gives (``use_server_tokenizer``), which the other
    served model's server is checked against."""

    def share_tokenizer(self, partner: Runtime) -> None:
        """Take ``partner``'s tokenizer (its ``tokenizer``, ``tokenizer_sha256`` and ``first_token``)."""
        ...

    def use_server_tokenizer(self, opened: OpenRuntime) -> None:
        """Tokenize with its own server, through ``opened`` (this runtime, opened): ``tokenizer`` then encodes by
        asking it, and ``tokenizer_sha256`` is None (no file is hashed)."""
        ...


RuntimeFactory = Callable[..., Runtime]

_RUNTIME_MEMBERS = (*Runtime.__annotations__, *(name for name, value in vars(Runtime).items()
                                               if callable(value) and not name.startswith("_")))


def _registered() -> dict[str, EntryPoint]:
    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def available_runtimes() -> tuple[str, ...]:
    """Names of every registered runtime, sorted."""
    return tuple(sorted(_registered()))


def _factory(name: str, registered: Mapping[str, EntryPoint]) -> RuntimeFactory:
    """The factory registered as ``name``; a ``StageError`` with a hint (or the registered names) if unknown."""
    if name in registered:
        factory: RuntimeFactory = registered[name].load()
        return factory
    known = sorted(registered)
    hint = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    raise StageError(f"runtime '{name}' is not registered in the '{ENTRY_POINT_GROUP}' entry-point group"
                     + (f"; did you mean '{hint[0]}'?" if hint else f" (registered: {', '.join(known) or 'none'})")
                     + "; install the package that provides it")


def runtime_for(table: Table, what: str | None = None) -> str:
    """The name of the registered runtime that runs inputs of ``table``'s format (its factory's ``formats``); a
    ``StageError`` naming the input (``what``, default ``input 'NAME'``) when none does, or when several do."""
    registered = _registered()
    running = [name for name in sorted(registered)
               if table.fmt in tuple(getattr(_factory(name, registered), "formats", ()))]
    if len(running) == 1:
        return running[0]
    what = what or f"input '{table.name}'"
    if running:
        raise StageError(f"{what}: the runtimes {', '.join(running)} of the '{ENTRY_POINT_GROUP}' entry-point group "
                         f"all run {table.fmt} inputs; uninstall the packages of all but one")
    raise StageError(f"{what} is not a model input: a {table.fmt} table, not a model folder (declare it with model: "
                     f"FOLDER); no runtime of the '{ENTRY_POINT_GROUP}' entry-point group runs {table.fmt} inputs "
                     f"(registered: {', '.join(sorted(registered)) or 'none'})")


def load_runtime(name: str, table: Table, **options: Any) -> Runtime:
    """The model input ``table`` prepared by the runtime registered as ``name``, called with ``options``
    (``device``, ``dtype``, ``threads``: module docstring); a ``StageError`` when the name is unknown or what the
    factory returns lacks a member of ``Runtime``."""
    runtime = _factory(name, _registered())(table, **options)
    if not isinstance(runtime, Runtime):
        missing = [member for member in _RUNTIME_MEMBERS if not hasattr(runtime, member)]
        raise StageError(f"runtime '{name}' returned a {type(runtime).__name__} without {', '.join(missing)}: not a "
                         f"runtime of the '{ENTRY_POINT_GROUP}' protocol")
    return runtime
