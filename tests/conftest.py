"""Shared fixtures: small paired-ratio specs written into a temporary folder, and a fresh ledger."""

from __future__ import annotations

import atexit
import hashlib
import importlib.util
import json
import os
import shutil
import sqlite3
import sys
import textwrap
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import settings

from certa.engine.core.scorers import ENTRY_POINT_GROUP
from certa.engine.core.tables import columns_to_csv_bytes
from certa.ledger import Ledger

ROOT = Path(__file__).resolve().parents[1]

os.environ["CERTA_CACHE_DIR"] = os.path.join(
    os.environ.get("TMPDIR", "/tmp"), f"certa-test-cache-{os.getpid()}")  # served runs' kept answers: not the user's
"""Served runs keep their answers for a resume (``certa.engine.core.runtimes.transcript_cache``): the tests' go to a
folder of this session, inherited by the certa processes they start, never to the user's cache, and removed when
the session ends."""
atexit.register(shutil.rmtree, os.environ["CERTA_CACHE_DIR"], ignore_errors=True)

POSTGRES_SERVER = os.environ.get("CERTA_TEST_POSTGRES_URL")
"""The PostgreSQL server the shared-ledger tests use (``.ci/run`` starts one on loopback and sets it)."""

VLLM_SERVER = os.environ.get("CERTA_TEST_VLLM_URL")
"""The vLLM server the served-model tests query (its OpenAI-compatible base URL, ``http://127.0.0.1:PORT/v1``):
``bash .ci/vllm`` starts one on loopback and prints it with ``CERTA_TEST_VLLM_MODEL`` (the model folder it serves),
``CERTA_TEST_VLLM_NAME`` (the served name) and ``CERTA_TEST_VLLM_IMPOSTOR_URL`` (a second server, under the same
name, of a perturbed copy of the weights); ``.ci/run`` starts them and sets those variables."""

_COMPONENT_OF_MODULE = {"test_ledger_postgres": "postgres", "test_postgres_sweep": "postgres",
                        "test_browser": "browser", "test_batch_cluster": "cluster", "test_wheel": "wheel",
                        "test_ledger_crash": "crash", "test_kills": "crash"}
_POSTGRES_FIXTURES = {"pg_url", "pg_recorded"}
_MODEL_FIXTURES = {"tiny_models", "tiny_architectures"}
_CLUSTER_FIXTURES = {"cluster_client"}
_SERVED_FIXTURES = {"vllm_server"}


_EXAMPLE_INPUTS = {spec.parent.name: (yaml.safe_load(spec.read_text(encoding="utf-8")).get("inputs") or {}).values()
                   for spec in sorted((ROOT / "specs").glob("*/spec.yaml"))}
MODEL_EXAMPLES = tuple(name for name, inputs in _EXAMPLE_INPUTS.items() if any("model" in entry for entry in inputs))
"""Example specs with model inputs (``model:``): their parametrized tests are marked ``models``."""
SERVED_EXAMPLES = tuple(name for name, inputs in _EXAMPLE_INPUTS.items() if any("endpoint" in e for e in inputs))
"""Example specs with a served model (``endpoint:``): they need its server, so the tests that run every example
leave them out; ``tests/served/test_served_examples.py`` runs them against the test server."""
OFFLINE_EXAMPLES = tuple(name for name in _EXAMPLE_INPUTS if name not in SERVED_EXAMPLES)
"""The example specs that run without a server: all but ``SERVED_EXAMPLES``."""
_MISSING_MODEL_LIBRARY = next((m for m in ("torch", "transformers", "tokenizers", "safetensors")
                               if importlib.util.find_spec(m) is None), None)
RUNNABLE_EXAMPLES = tuple(name for name in OFFLINE_EXAMPLES if not (_MISSING_MODEL_LIBRARY and name in MODEL_EXAMPLES))
"""The example specs this installation can run without a server: the offline ones, but the model examples without
the ``models`` extra (tests that run every example at once use this; their parametrized model cases are skipped
with the reason)."""


def require_model_libraries() -> None:
    """Skip the calling test, with the reason, when the ``models`` extra or torch is not installed."""
    if _MISSING_MODEL_LIBRARY:
        pytest.skip(f"the model tests need {_MISSING_MODEL_LIBRARY}: pip install torch==2.13.0 'certa[models]' "
                    "(.ci/run installs them)")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the real component it needs (``postgres``, ``browser``, ``cluster``, ``crash``,
    ``wheel``, ``models``, ``served``), so that ``pytest -m "not (slow or postgres or browser or cluster or crash or wheel or
    adversarial)"`` is a unit run of seconds. A test needs PostgreSQL when it takes a PostgreSQL fixture or a
    ``postgresql`` parameter, a Dask cluster when it takes the cluster fixture or starts the default LocalCluster
    (its name says so), and kills real processes (``crash``) when its module or its name says so."""
    for item in items:
        module = getattr(item, "module", None)
        component = _COMPONENT_OF_MODULE.get(module.__name__.rpartition(".")[2]) if module else None
        if component:
            item.add_marker(component)
        names = set(getattr(item, "fixturenames", ()))
        callspec = getattr(item, "callspec", None)
        if names & _POSTGRES_FIXTURES or (callspec and "postgresql" in map(str, callspec.params.values())):
            item.add_marker("postgres")
        if names & _SERVED_FIXTURES:
            item.add_marker("served")
        if names & _CLUSTER_FIXTURES or "local_cluster" in item.name:
            item.add_marker("cluster")
        if "killed" in item.name:
            item.add_marker("crash")
        if names & _MODEL_FIXTURES or (callspec and any(example in str(value) for value in callspec.params.values()
                                                        for example in MODEL_EXAMPLES)):
            item.add_marker("models")
            if _MISSING_MODEL_LIBRARY and not names & _MODEL_FIXTURES:
                item.add_marker(pytest.mark.skip(reason=f"the model examples need {_MISSING_MODEL_LIBRARY}: pip install "
                                                        "torch==2.13.0 'certa[models]' (.ci/run installs them)"))


@pytest.fixture(autouse=True)
def _no_model_library_warm_up(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Outside the tests marked ``models``, reading a model folder does not import torch and transformers while it
    hashes (``certa.engine.core.inputs.warm_model_libraries``, a speed-up of loading: 5-10 s the first time in a test
    process, paid by the unit tier for nothing, as those tests load no model). The warm-up's own tests are marked
    ``models``; no number depends on it."""
    if request.node.get_closest_marker("models") is None:
        from certa.engine.core import inputs

        monkeypatch.setattr(inputs, "warm_model_libraries", lambda folder: None)


def require_postgres(what: str) -> str:
    """The test server's URL; without one the test is skipped, or fails under CI, which must run ``what``."""
    if not POSTGRES_SERVER:
        if os.environ.get("CI"):
            pytest.fail(f"CI must run the PostgreSQL {what}: .ci/run sets CERTA_TEST_POSTGRES_URL", pytrace=False)
        pytest.skip(f"set CERTA_TEST_POSTGRES_URL to run the PostgreSQL {what}")
    return POSTGRES_SERVER


@dataclass(frozen=True)
class VllmServer:
    """The vLLM test servers: ``url`` (the OpenAI-compatible base, ending in ``/v1``, of the server of the
    reference weights), ``name`` (the served model name), ``folder`` (the local model folder it loaded, the
    reference for its weights and tokenizer) and ``impostor_url`` (a second server, under the same name, of a
    copy of those weights perturbed by 5 %: ``.ci/vllm``)."""

    url: str
    name: str
    folder: Path
    impostor_url: str


@pytest.fixture(scope="session")
def vllm_server() -> VllmServer:
    """The server ``CERTA_TEST_VLLM_URL`` names; without one the test is skipped, or fails under CI, which starts
    one (``.ci/vllm``)."""
    folder = os.environ.get("CERTA_TEST_VLLM_MODEL")
    impostor = os.environ.get("CERTA_TEST_VLLM_IMPOSTOR_URL")
    if not VLLM_SERVER or not folder or not impostor:
        if os.environ.get("CI"):
            pytest.fail("CI must run the served-model tests: .ci/run starts the vLLM servers (.ci/vllm) and sets "
                        "CERTA_TEST_VLLM_URL, CERTA_TEST_VLLM_MODEL and CERTA_TEST_VLLM_IMPOSTOR_URL", pytrace=False)
        pytest.skip("set CERTA_TEST_VLLM_URL, CERTA_TEST_VLLM_MODEL and CERTA_TEST_VLLM_IMPOSTOR_URL to run the "
                    "served-model tests: `bash .ci/vllm` starts the vLLM servers on loopback and prints them")
    return VllmServer(url=VLLM_SERVER.rstrip("/"), name=os.environ.get("CERTA_TEST_VLLM_NAME", "tiny-llama"),
                      folder=Path(folder), impostor_url=impostor.rstrip("/"))


@contextmanager
def fresh_postgres_databases(what: str) -> Iterator[Callable[..., str]]:
    """A factory of new databases on the test server (each call: one more URL; empty, or a copy of the database
    ``template`` names when given), all dropped afterwards; ``require_postgres(what)`` first."""
    from sqlalchemy import create_engine, text
    from sqlalchemy.engine import make_url

    server = require_postgres(what)
    admin = create_engine(server, isolation_level="AUTOCOMMIT")
    created: list[str] = []

    def new(template: str | None = None) -> str:
        name = f"certa_test_{uuid.uuid4().hex[:12]}"
        with admin.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"' + (f' TEMPLATE "{template}"' if template else "")))
        created.append(name)
        return make_url(server).set(database=name).render_as_string(hide_password=False)

    try:
        yield new
    finally:
        with admin.connect() as conn:
            for name in created:
                conn.execute(text(f'DROP DATABASE "{name}" WITH (FORCE)'))
        admin.dispose()


# Property tests draw the same examples on every run: a red CI must be reproducible, never a lottery.
settings.register_profile("certa", derandomize=True, deadline=None)
settings.load_profile("certa")


def window_columns(n: int, *, seed: int, shift: float = 0.01, tokens: np.ndarray | None = None) -> tuple[dict, dict]:
    """Baseline and subject window tables (final phase only) with a known shift in log-loss."""
    rng = np.random.default_rng(seed)
    tok = rng.integers(64, 512, size=n) if tokens is None else tokens
    base = 2.0 + rng.gamma(4.0, 0.25, size=n)
    subj = base + shift + rng.normal(0.0, 0.05, size=n)
    ids = [f"w{i:05d}" for i in range(n)]
    return ({"window_id": ids, "tokens": tok, "mean_nll": np.round(base, 6)},
            {"window_id": ids, "tokens": tok, "mean_nll": np.round(subj, 6)})


SMALL_SPEC = """\
certa: 1
name: small-paired
seed: 7
profile: dev
inputs:
  baseline: {path: data/baseline.csv}
  subject: {path: data/subject.csv}
stages:
  - id: ratio
    use: paired.ppl_ratio
    with: {baseline: baseline, subject: subject, replicates: 500}
gates:
  - id: no-regression
    metric: ratio.token_perplexity.display_ci[1]
    max: 1.05
"""


def small_spec_folder(folder: Path, *, seed: int = 7) -> Path:
    """``SMALL_SPEC`` (with ``seed``) and its 60 windows of data written into ``folder`` (created if needed);
    returns the spec's path."""
    base, subj = window_columns(60, seed=3)
    (folder / "data").mkdir(parents=True, exist_ok=True)
    (folder / "data" / "baseline.csv").write_bytes(columns_to_csv_bytes(base))
    (folder / "data" / "subject.csv").write_bytes(columns_to_csv_bytes(subj))
    spec = folder / "spec.yaml"
    spec.write_text(SMALL_SPEC.replace("seed: 7", f"seed: {seed}"), encoding="utf-8")
    return spec


INTERVAL_GATE = """\
  - id: no-regression
    metric: ratio.token_perplexity.display_ci
    interval: {max: MAX}
"""
"""The small spec's gate as an interval gate; its interval is [1.00437, 1.02957] (seed 7, 60 windows)."""


def interval_spec(spec: Path, bound: str) -> Path:
    """``spec`` (``SMALL_SPEC``'s, rewritten in place) with its gate an interval gate of max ``bound``: PASS above
    1.02957, INCONCLUSIVE between 1.00437 and it (1.02 gives a run of verdict INCONCLUSIVE), FAIL below."""
    text = spec.read_text()
    start = text.index("  - id: no-regression")
    spec.write_text(text[:start] + INTERVAL_GATE.replace("MAX", bound))
    return spec


def two_run_ledger(folder: Path) -> tuple[Path, Path]:
    """``folder/ledger.db`` holding two runs of ``SMALL_SPEC`` (seed 8, then 7), and the spec (seed 7)."""
    from certa.engine import run

    db = folder / "ledger.db"
    with Ledger.open(db) as ledger:
        for seed in (8, 7):
            spec = small_spec_folder(folder, seed=seed)
            run(spec, ledger=ledger)
    return spec, db


@pytest.fixture
def small_spec(tmp_path: Path) -> Path:
    """A dev-profile paired-ratio spec on 60 windows, in its own folder (returns the spec path)."""
    return small_spec_folder(tmp_path)


@pytest.fixture
def example_spec(tmp_path: Path) -> Path:
    """A copy of specs/paired-ratio (release profile) in a temporary folder."""
    target = tmp_path / "paired-ratio"
    shutil.copytree(ROOT / "specs" / "paired-ratio", target)
    return target / "spec.yaml"


@pytest.fixture
def ledger(tmp_path: Path):
    with Ledger.open(tmp_path / "ledger.db") as store:
        yield store


@contextmanager
def read_only_folder(folder: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``folder`` as on read-only media for the time of the block: its files 0444, the folder 0555, and for root
    (whom permission bits do not stop) ``os.access`` denying writes inside it."""
    for path in folder.iterdir():
        path.chmod(0o444)
    folder.chmod(0o555)
    if os.geteuid() == 0:
        real_access, inside = os.access, folder.resolve()

        def access(path: object, mode: int, *args: object, **kwargs: object) -> bool:
            if mode & os.W_OK and Path(os.fspath(path)).resolve().is_relative_to(inside):  # type: ignore[arg-type]
                return False
            return real_access(path, mode, *args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(os, "access", access)
    try:
        yield
    finally:
        folder.chmod(0o755)


def write_spec(folder: Path, text: str) -> Path:
    path = folder / "spec.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def run_concurrently(ledger_location: str | Path, spec: Path, *, writers: int, runs_each: int) -> list[BaseException]:
    """Run ``spec`` from several threads, each with its own connection to one ledger; returns the errors."""
    import threading

    from certa.engine import run

    errors: list[BaseException] = []

    def writer() -> None:
        try:
            with Ledger.open(ledger_location) as store:
                for _ in range(runs_each):
                    run(spec, ledger=store)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


class AccuracyDifference:
    """A discrete scorer: per prompt, the difference of two accuracies (values given by prompt), whose metric has
    the finite support [-1, 1]. It declares nothing about identity: its 0 (both models right, or both wrong) does
    not mean identical outputs."""

    def __init__(self, values: dict) -> None:
        self.values = values

    def support(self) -> tuple[float, float]:
        return (-1.0, 1.0)

    def prompts(self, reference, candidate):
        return sorted(self.values)

    def score(self, reference, candidate, prompt, K):
        return self.values[prompt]


PLUGIN_MODULE = "certa_test_scorer_plugin"

PLUGIN_SOURCE = '''
"""A test scorer: score = candidate value - reference value (+ shift), one row per prompt."""
CALLS = []


class ShiftScorer:
    def __init__(self, *, metric=None, options=None):
        self.shift = float((options or {}).get("shift", 0.0))

    def prompts(self, reference, candidate):
        return sorted(reference.text("prompt_id").tolist())

    def score(self, reference, candidate, prompt, K):
        CALLS.append(prompt)
        ref = dict(zip(reference.text("prompt_id").tolist(), reference.numeric("value").tolist()))
        cand = dict(zip(candidate.text("prompt_id").tolist(), candidate.numeric("value").tolist()))
        return cand[prompt] - ref[prompt] + self.shift
'''


@pytest.fixture
def scorer_plugin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Install a scorer plugin the way a package would: a module plus a *.dist-info with entry_points.txt."""
    site = tmp_path / "site"
    site.mkdir()
    (site / f"{PLUGIN_MODULE}.py").write_text(textwrap.dedent(PLUGIN_SOURCE), encoding="utf-8")
    info = site / "certa_test_scorers-0.0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: certa-test-scorers\nVersion: 0.0.1\n")
    (info / "entry_points.txt").write_text(f"[{ENTRY_POINT_GROUP}]\ntest_shift = {PLUGIN_MODULE}:ShiftScorer\n")
    monkeypatch.syspath_prepend(str(site))
    yield site
    sys.modules.pop(PLUGIN_MODULE, None)


def rebuild_merkle_nodes(conn) -> None:
    """Recompute ``merkle_nodes`` from the entries on a DB-API connection (sqlite3 or a SQLAlchemy
    connection's ``exec_driver_sql``-less raw one): what an editor who keeps the whole database
    self-consistent does after rewriting or truncating the chain."""
    from certa.ledger.merkle import entry_leaves, node_seq, perfect_nodes

    hashes = [row[0] for row in conn.execute("SELECT entry_hash FROM entries ORDER BY seq").fetchall()]
    conn.execute("DELETE FROM merkle_nodes")
    conn.executemany("INSERT INTO merkle_nodes (node_seq, level, position, hash) VALUES (?, ?, ?, ?)",
                     [(node_seq(level, position), level, position, digest.hex())
                      for (level, position), digest in perfect_nodes(entry_leaves(hashes)).items() if level])


def key_pair_files(folder: Path, name: str) -> tuple[Path, Path]:
    """A new Ed25519 key pair written as ``folder/name.key`` and ``folder/name.pub`` (PEM), as 'certa keygen' writes
    it; returns the two paths."""
    from certa.engine.foundation.signing import generate_key_pair

    private_pem, public_pem = generate_key_pair()
    (folder / f"{name}.key").write_bytes(private_pem)
    (folder / f"{name}.pub").write_bytes(public_pem)
    return folder / f"{name}.key", folder / f"{name}.pub"


def rechain(db: Path, from_seq: int) -> None:
    """Recompute payload hashes, entry hashes and the head from ``from_seq`` on, as a careful forger would."""
    from certa.ledger.chain import entry_hash

    with sqlite3.connect(db) as conn:
        rows = conn.execute("SELECT seq, run_id, kind, recorded_at, payload, prev_hash FROM entries ORDER BY seq").fetchall()
        prev = None
        for seq, run_id, kind, recorded_at, payload, prev_hash in rows:
            if seq < from_seq:
                prev = conn.execute("SELECT entry_hash FROM entries WHERE seq = ?", (seq,)).fetchone()[0]
                continue
            payload_sha = hashlib.sha256(payload.encode("utf-8")).hexdigest()
            digest = entry_hash(seq=seq, run_id=run_id, kind=kind, recorded_at=recorded_at,
                                payload_sha256=payload_sha, prev_hash=prev or prev_hash)
            conn.execute("UPDATE entries SET payload_sha256 = ?, prev_hash = ?, entry_hash = ? WHERE seq = ?",
                         (payload_sha, prev or prev_hash, digest, seq))
            prev = digest
        conn.execute("UPDATE ledger_meta SET value = ? WHERE key = 'head'", (f"{rows[-1][0]}:{prev}",))


TINY_MODEL_TEXT = "\n".join(filter(None, (textwrap.dedent(m.__doc__ or "") for m in (textwrap, os, shutil, hashlib,
                                                                                       sqlite3, uuid))))
"""Local text the tiny test models are trained on (standard-library docstrings: nothing is downloaded)."""


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Three tiny GPT-2 model folders built locally once per session (``certa.engine.core.models.tiny``):
    ``baseline``, ``same`` (a bit-identical copy), ``subject`` (every weight matrix perturbed by 5%), and
    ``other`` (trained from another seed, with its own tokenizer trained on the same text). Skipped with the
    reason when the ``models`` extra or torch is not installed."""
    for module in ("torch", "transformers", "tokenizers", "safetensors"):
        pytest.importorskip(module, reason=f"the model tests need {module}: pip install torch==2.13.0 "
                                           "'certa[models]' (.ci/run installs them)")
    from certa.engine.core.models.tiny import build_tiny_model, perturbed_copy

    root = tmp_path_factory.mktemp("tiny_models")
    baseline = build_tiny_model(root / "baseline", TINY_MODEL_TEXT, seed=0)
    return {"baseline": baseline,
            "same": perturbed_copy(baseline, root / "same", scale=0.0),
            "subject": perturbed_copy(baseline, root / "subject", scale=0.05, seed=1),
            "other": build_tiny_model(root / "other", TINY_MODEL_TEXT[: len(TINY_MODEL_TEXT) // 2], seed=1,
                                      vocab_size=300)}


def require_architecture(model_type: str) -> None:
    """Skip the calling test, with the reason, when the installed transformers has no ``model_type`` architecture
    (certa supports transformers 4.46 on; some architectures arrived later)."""
    import transformers

    from certa.engine.core.models.tiny import MINIMUM_TRANSFORMERS

    if model_type not in transformers.CONFIG_MAPPING:
        since = MINIMUM_TRANSFORMERS.get(model_type)
        pytest.skip(f"transformers {transformers.__version__} has no '{model_type}' architecture"
                    + (f" (it arrived in transformers {since})" if since else ""))


@pytest.fixture(scope="session")
def tiny_architectures(tmp_path_factory: pytest.TempPathFactory) -> Callable[..., Path]:
    """Tiny untrained models of the architectures of ``certa.engine.core.models.tiny.ARCHITECTURES``, each built
    locally on first use and kept for the session: ``tiny_architectures("llama")`` (float32 weights in
    ``model.safetensors``), ``tiny_architectures("qwen2", weights_dtype="bfloat16", shard_bytes=16_000)`` (sharded
    with an index). Skipped with the reason when the ``models`` extra or torch is not installed, or the installed
    transformers lacks the architecture."""
    for module in ("torch", "transformers", "tokenizers", "safetensors"):
        pytest.importorskip(module, reason=f"the model tests need {module}: pip install torch==2.13.0 "
                                           "'certa[models]' (.ci/run installs them)")
    from certa.engine.core.models.tiny import build_tiny_architecture

    root = tmp_path_factory.mktemp("tiny_architectures")
    built: dict[tuple[str, str, int | None], Path] = {}

    def build(model_type: str, *, weights_dtype: str = "float32", shard_bytes: int | None = None) -> Path:
        require_architecture(model_type)
        key = (model_type, weights_dtype, shard_bytes)
        if key not in built:
            built[key] = build_tiny_architecture(root / "-".join(str(part) for part in key), model_type,
                                                 TINY_MODEL_TEXT, seed=7, weights_dtype=weights_dtype,
                                                 shard_bytes=shard_bytes)
        return built[key]
    return build


@pytest.fixture(scope="session")
def example_runs(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
                 worker_id: str) -> tuple[Path, dict[str, str]]:
    """The runnable example specs run into one ledger, once per test session, shared by every xdist worker:
    (ledger path, example folder -> run id). The first worker to ask builds it under a file lock in the session's
    shared temporary folder; the others wait and read it. The model examples are left out when the session selects
    no test marked ``models`` (the unit tier): every worker selects the same tests, so all agree. Tests must only
    read it (copy it to change it)."""
    import fcntl

    from click.testing import CliRunner

    from certa.cli import main

    shared = tmp_path_factory.getbasetemp() if worker_id == "master" else tmp_path_factory.getbasetemp().parent
    folder, index = shared / "example-runs", shared / "example-runs" / "runs.json"
    wanted = [name for name in RUNNABLE_EXAMPLES
              if name not in MODEL_EXAMPLES or request.config.stash.get(_SELECTS_MODELS, True)]
    with open(shared / "example-runs.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not index.exists():
            folder.mkdir(exist_ok=True)
            runs = {}
            for example in wanted:
                result = CliRunner().invoke(main, ["run", str(ROOT / "specs" / example / "spec.yaml"), "--ledger",
                                                   str(folder / "ledger.db"), "--json"], catch_exceptions=False)
                assert result.exit_code == 0, result.output
                runs[example] = json.loads(result.stdout)["run_id"]
            index.write_text(json.dumps(runs), encoding="utf-8")
    return folder / "ledger.db", json.loads(index.read_text(encoding="utf-8"))


_SELECTS_MODELS = pytest.StashKey[bool]()
"""Whether the session selected a test marked ``models`` (``pytest_collection_finish``)."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """Note whether any selected test is marked ``models`` (``example_runs`` runs the model examples only then)."""
    session.config.stash[_SELECTS_MODELS] = any(item.get_closest_marker("models") for item in session.items)


def config_edit(**changes: object) -> Callable[[Path], None]:
    """An edit of a model folder: its ``config.json`` with ``changes`` set (hostile-folder tests and bench)."""
    def change(folder: Path) -> None:
        config = json.loads((folder / "config.json").read_text())
        config.update(changes)
        (folder / "config.json").write_text(json.dumps(config))
    return change
