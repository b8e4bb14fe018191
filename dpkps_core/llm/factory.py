"""THE registry of LLM backends (docs/ARCHITECTURE.md, llm/): one :class:`BackendSpec` per kind — its name, its
label in the app, its phrase in the CLI's help, the settings it takes, whether it runs on this machine, its default
model and API-key variable, and the factory that builds it. The CLI's ``--backend`` choices, the app's backend
select box and :func:`make_backend` all read it, so a new backend is ONE :func:`register_backend` call.

Built in: ``offline`` (the bundled SmolLM2, no key; the default), ``local`` (a Hugging Face model folder on disk)
and ``openai`` (any OpenAI-compatible server). The backends themselves live in :mod:`dpkps_core.llm.local` and
:mod:`dpkps_core.llm.openai_client`. A spec names the environment variable of an API key, never a key: keys stay in
memory (the app's session) or in the environment (docs/DESIGN.md §2.5, docs/PRIVACY.md).
"""

from __future__ import annotations

import dataclasses
import os
import re
import threading
from typing import Callable

from dpkps_core.errors import ParameterError
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.local import DecodeEngine, LocalModelBackend, OfflineBackend
from dpkps_core.llm.offline_weights import OFFLINE_MODEL_NAME
from dpkps_core.llm.openai_client import DEFAULT_API_KEY_ENV, DEFAULT_OPENAI_MODEL, OpenAICompatibleBackend

#: The settings a backend may take beyond the common ones (timeout, concurrency, threads, device, engine):
#: ``model_path`` (a model folder on this machine), ``model`` (a model name), ``base_url`` (a server), ``api_key``.
BACKEND_SETTINGS = ("model_path", "model", "base_url", "api_key")
#: The backend used when none is named (the CLI's default, the app's, the comparison's).
DEFAULT_BACKEND = "offline"

_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,31}$")


@dataclasses.dataclass(frozen=True)
class BackendRequest:
    """What a caller asks of a backend; each factory reads the fields its backend uses and ignores the rest.

    ``api_key`` is held in memory only (the app's session); ``api_key_env`` is the NAME of an environment variable
    (the spec's own when the caller gives none). ``device`` and ``engine`` apply to backends that run here."""

    model: str | None = None
    base_url: str | None = None
    api_key: str | None = dataclasses.field(default=None, repr=False)
    api_key_env: str | None = None
    timeout: float = 60.0
    concurrency: int = 4
    threads: int = 1
    device: str | None = None
    model_path: str | os.PathLike[str] | None = None
    engine: str | None = None


@dataclasses.dataclass(frozen=True)
class BackendSpec:
    """One kind of LLM backend, as the CLI, the app and :func:`make_backend` see it.

    Attributes:
        name: the kind (``--backend NAME``, the app's session value, the audit log's ``backend``).
        label: the app's option text.
        help: the CLI's phrase for it in ``--backend``'s help (``NAME = help``).
        build: the factory: a :class:`BackendRequest` → an :class:`~dpkps_core.llm.backends.LLMBackend` (or a
            :class:`~dpkps_core.errors.DPKPSError` saying what is missing, e.g. an API key).
        runs_here: the model runs on this machine (offline, no key): device, engine, threads, batch size and
            repetition control apply, the app shares one model per server, a document gets 256 tokens by default.
        settings: which of :data:`BACKEND_SETTINGS` it takes (the CLI refuses ``--model-path`` for a backend that
            does not take it; the app shows only these fields).
        default_model: the model it writes with when none is named (None: named by the folder or the server).
        api_key_env: the environment variable its API key is read from by default (None: no key).
    """

    name: str
    label: str
    help: str
    build: Callable[[BackendRequest], LLMBackend]
    runs_here: bool
    settings: tuple[str, ...] = ()
    default_model: str | None = None
    api_key_env: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ParameterError(f"A backend name is 1 to 32 lowercase letters, digits, '-' or '_' (got {self.name!r}).")
        if not (isinstance(self.label, str) and self.label.strip() and isinstance(self.help, str) and self.help.strip()):
            raise ParameterError(f"The backend {self.name!r} needs a label for the app and a help phrase for the CLI.")
        if not callable(self.build):
            raise ParameterError(f"The backend {self.name!r} needs a factory (build) that makes its client.")
        if not isinstance(self.runs_here, bool):
            raise ParameterError(f"runs_here of the backend {self.name!r} must be True or False.")
        object.__setattr__(self, "settings", tuple(self.settings))
        unknown = sorted(set(self.settings) - set(BACKEND_SETTINGS))
        if unknown:
            raise ParameterError(f"Unknown setting(s) {', '.join(unknown)} of the backend {self.name!r}; choose among "
                                 f"{', '.join(BACKEND_SETTINGS)}.")
        if self.api_key_env is not None and "api_key" not in self.settings:
            raise ParameterError(f"The backend {self.name!r} names an API-key variable but takes no api_key setting.")


_REGISTRY: dict[str, BackendSpec] = {}
_LOCK = threading.Lock()


def register_backend(spec: BackendSpec, *, replace: bool = False) -> BackendSpec:
    """Add a backend kind (in order: the CLI and the app list the kinds in registration order). A name already
    registered is refused unless ``replace``. Returns ``spec``."""
    if not isinstance(spec, BackendSpec):
        raise ParameterError("register_backend takes a BackendSpec.")
    with _LOCK:
        if spec.name in _REGISTRY and not replace:
            raise ParameterError(f"An LLM backend named {spec.name!r} is already registered.")
        _REGISTRY[spec.name] = spec
    return spec


def unregister_backend(name: str) -> None:
    """Remove a registered kind (a plug-in's or a test's); the default backend cannot be removed."""
    if name == DEFAULT_BACKEND:
        raise ParameterError(f"The default backend {DEFAULT_BACKEND!r} cannot be removed.")
    with _LOCK:
        if _REGISTRY.pop(name, None) is None:
            raise ParameterError(f"No LLM backend named {name!r} is registered.")


def backend_kinds() -> tuple[str, ...]:
    """The registered kinds, default first (the CLI's ``--backend`` choices, the app's options)."""
    return tuple(_REGISTRY)


def backend_spec(kind: str) -> BackendSpec:
    """The spec of ``kind``, or a ParameterError naming the registered kinds."""
    spec = _REGISTRY.get(kind) if isinstance(kind, str) else None
    if spec is None:
        raise ParameterError(f"Unknown LLM backend {kind!r}; choose one of {', '.join(backend_kinds())}.")
    return spec


def backend_help() -> str:
    """``--backend``'s help: one ``name = phrase`` per registered kind."""
    return "; ".join(f"{s.name} = {s.help}" for s in _REGISTRY.values())


def api_key_envs() -> tuple[str, ...]:
    """The API-key variables of every registered backend (their values are masked wherever a file is written)."""
    return tuple(dict.fromkeys(s.api_key_env for s in _REGISTRY.values() if s.api_key_env))


def make_backend(
    kind: str = DEFAULT_BACKEND,
    *,
    model: str | None = None,
    base_url: str | None = None,
    api_key: str | None = None,
    api_key_env: str | None = None,
    timeout: float = 60.0,
    concurrency: int = 4,
    threads: int = 1,
    device: str | None = None,
    model_path: str | os.PathLike[str] | None = None,
    engine: str | None = None,
) -> LLMBackend:
    """Build a backend of a registered ``kind`` (:func:`backend_kinds`) through its spec's factory. ``device``
    (auto/cpu/cuda) and ``engine`` apply to backends that run here: ``"ct2"`` (CTranslate2, converted once; the
    default, or ``$DPKPS_ENGINE``) or ``"torch"`` (:func:`dpkps_core.llm.ct2.choose_engine`; a default that cannot
    be met falls back to torch and says so in ``backend.engine_note``). ``api_key_env`` defaults to the spec's."""
    spec = backend_spec(kind)
    return spec.build(BackendRequest(
        model=model, base_url=base_url, api_key=api_key, api_key_env=api_key_env or spec.api_key_env,
        timeout=timeout, concurrency=concurrency, threads=threads, device=device, model_path=model_path,
        engine=engine))


# ------------------------------------------------------------------------------------------ the built-in backends

def _engine(kind: str, request: BackendRequest) -> tuple[DecodeEngine | None, str | None]:
    """The decoding engine of a backend that runs here and its one-line note (:func:`~dpkps_core.llm.ct2.choose_engine`)."""
    from dpkps_core.device import resolve_device
    from dpkps_core.llm.ct2 import choose_engine

    return choose_engine(kind, setting=request.engine, device=resolve_device(request.device), threads=request.threads,
                         model_path=request.model_path)


def _build_offline(request: BackendRequest) -> LLMBackend:
    decoder, note = _engine("offline", request)
    backend = OfflineBackend(threads=request.threads, device=request.device, engine=decoder)
    backend.engine_note = note
    return backend


def _build_local(request: BackendRequest) -> LLMBackend:
    if request.model_path is None:
        raise ParameterError("The local backend needs the model folder (--model-path DIR).")
    decoder, note = _engine("local", request)
    backend = LocalModelBackend(model_path=request.model_path, threads=request.threads, device=request.device,
                                engine=decoder)
    backend.engine_note = note
    return backend


def _build_openai(request: BackendRequest) -> LLMBackend:
    return OpenAICompatibleBackend(
        model=request.model, base_url=request.base_url, api_key=request.api_key,
        api_key_env=request.api_key_env or DEFAULT_API_KEY_ENV, timeout=request.timeout,
        max_concurrency=request.concurrency,
    )


register_backend(BackendSpec(
    name="offline", label="Offline SmolLM2-135M (default, runs here)",
    help="bundled SmolLM2-135M-Instruct (no key)",
    build=_build_offline, runs_here=True, default_model=OFFLINE_MODEL_NAME))
register_backend(BackendSpec(
    name="local", label="My own model folder (runs here)",
    help="your own Hugging Face model folder on disk (--model-path), loaded offline",
    build=_build_local, runs_here=True, settings=("model_path",)))
register_backend(BackendSpec(
    name="openai", label="OpenAI-compatible server",
    help="any OpenAI-compatible chat-completions server (OpenAI, vLLM, llama.cpp server, Ollama, LM Studio, Azure)",
    build=_build_openai, runs_here=False, settings=("model", "base_url", "api_key"),
    default_model=DEFAULT_OPENAI_MODEL, api_key_env=DEFAULT_API_KEY_ENV))
