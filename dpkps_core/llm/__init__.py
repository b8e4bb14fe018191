"""The LLM writing step (post-processing of the DP keyphrase sequences, docs/DESIGN.md §2.5): backends, local models,
prompts and the runner. This package's ``__init__`` is the only module that re-exports names of other modules
(docs/ARCHITECTURE.md, llm/); inside the package and in callers, import a name from the module that defines it."""

from dpkps_core.llm.backends import LLMBackend, TransientLLMError, cache_root
from dpkps_core.llm.estimate import CostEstimate, estimate_cost
from dpkps_core.llm.factory import (
    DEFAULT_BACKEND,
    BackendSpec,
    backend_kinds,
    backend_spec,
    make_backend,
    register_backend,
)
from dpkps_core.llm.local import LocalModelBackend, LocalTransformersBackend, OfflineBackend
from dpkps_core.llm.offline_weights import ensure_offline_model
from dpkps_core.llm.openai_client import OpenAICompatibleBackend
from dpkps_core.llm.prompts import (
    DEFAULT_TEMPLATE,
    FewShotExample,
    PromptConfig,
    check_not_private,
    file_fingerprint,
    load_few_shot,
    parse_few_shot,
    preview,
    read_sequences,
    render_prompt,
)
from dpkps_core.llm.retry import RetriesExhausted, call_with_retries
from dpkps_core.llm.runner import run_generation
from dpkps_core.llm.settings import GenerationSettings, GenerationSummary, Progress
from dpkps_core.records.runfolder import (
    AUDIT_FILE,
    DOCUMENTS_FILE,
    FAILURES_FILE,
    read_documents,
    read_failures,
    repair_jsonl_tail,
)
from dpkps_core.method.sequences import KeyphraseSequence

__all__ = [
    "AUDIT_FILE",
    "BackendSpec",
    "CostEstimate",
    "DEFAULT_BACKEND",
    "DEFAULT_TEMPLATE",
    "DOCUMENTS_FILE",
    "FAILURES_FILE",
    "FewShotExample",
    "GenerationSettings",
    "GenerationSummary",
    "KeyphraseSequence",
    "LLMBackend",
    "LocalModelBackend",
    "LocalTransformersBackend",
    "OfflineBackend",
    "OpenAICompatibleBackend",
    "Progress",
    "PromptConfig",
    "RetriesExhausted",
    "TransientLLMError",
    "backend_kinds",
    "backend_spec",
    "cache_root",
    "call_with_retries",
    "check_not_private",
    "ensure_offline_model",
    "estimate_cost",
    "file_fingerprint",
    "load_few_shot",
    "make_backend",
    "parse_few_shot",
    "preview",
    "read_documents",
    "read_failures",
    "read_sequences",
    "register_backend",
    "render_prompt",
    "repair_jsonl_tail",
    "run_generation",
]
