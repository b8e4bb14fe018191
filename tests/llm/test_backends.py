"""THE registry of LLM backends (dpkps_core/llm/factory.py, issue 32 §5): every registered kind builds without a
network or names what it misses; the CLI's ``--backend`` choices, the app's options and the factory all read the
registry, so a new backend is one :func:`register_backend` call — shown here end to end with a scripted backend."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Iterator

import pytest
from app_helpers import state_of, fast_env  # noqa: F401 (fixture)
from app_helpers import assert_clean, click, goto, new_app, toy_csv, upload_corpus, wait_job, walk
from llm_fakes import FakeBackend, make_run_dir

from dpkps_core.cli.main import build_parser, main
from dpkps_core.errors import DPKPSError, LLMError, ParameterError
from dpkps_core.llm.backends import LLMBackend
from dpkps_core.llm.factory import (BACKEND_SETTINGS, DEFAULT_BACKEND, BackendRequest, BackendSpec, api_key_envs,
                                    backend_help, backend_kinds, backend_spec, make_backend, register_backend,
                                    unregister_backend)
from studio import generation_steps

SECRET = "sk-test-0123456789abcdef"


def _backend_choices(command: str) -> tuple[str, ...]:
    """The ``--backend`` choices of one CLI command, as argparse holds them."""
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    action = next(a for a in sub.choices[command]._actions if "--backend" in a.option_strings)
    return tuple(action.choices)


@pytest.fixture()
def no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for env in api_key_envs():
        monkeypatch.delenv(env, raising=False)


@pytest.fixture()
def fake_kind() -> Iterator[BackendSpec]:
    """A scripted backend registered for the test only (a plug-in's one call)."""
    built: list[BackendRequest] = []

    def build(request: BackendRequest) -> LLMBackend:
        built.append(request)
        return FakeBackend(max_concurrency=request.concurrency)

    spec = register_backend(BackendSpec(name="fake", label="A scripted test backend", help="scripted replies (tests)",
                                        build=build, runs_here=False, settings=("model",), default_model="fake-model"))
    try:
        yield spec
    finally:
        unregister_backend("fake")
    assert built, "the factory was never called"


def test_the_built_in_backends_are_registered_with_offline_first_as_the_default() -> None:
    assert backend_kinds() == ("offline", "local", "openai") and DEFAULT_BACKEND == backend_kinds()[0] == "offline"
    offline, local, openai = (backend_spec(k) for k in backend_kinds())
    assert offline.runs_here and local.runs_here and not openai.runs_here
    assert (offline.settings, local.settings) == ((), ("model_path",))
    assert set(openai.settings) == {"model", "base_url", "api_key"} and openai.api_key_env == "OPENAI_API_KEY"
    assert (offline.default_model, openai.default_model) == ("SmolLM2-135M-Instruct", "gpt-4o-mini")
    assert build_parser().parse_args(["generate", "--sequences", "s", "--doc-type", "d"]).backend == DEFAULT_BACKEND


@pytest.mark.parametrize("kind", backend_kinds())
def test_every_registered_kind_builds_offline_or_names_what_it_misses(kind: str, no_keys: None,
                                                                      tmp_path: Path) -> None:
    spec = backend_spec(kind)
    try:
        backend = make_backend(kind, device="cpu", engine="torch")  # nothing downloaded, nothing loaded
    except DPKPSError as exc:
        missing = ([spec.api_key_env] if spec.api_key_env else []) + (["--model-path"] if "model_path" in spec.settings
                                                                      else [])
        assert missing and any(m in str(exc) for m in missing), str(exc)
        return
    assert isinstance(backend, LLMBackend) and backend.name == kind
    assert backend.model == (spec.default_model or backend.model)


def test_the_built_ins_build_when_given_what_they_need(no_keys: None, tmp_path: Path) -> None:
    offline = make_backend(device="cpu", engine="torch")
    assert (offline.name, offline.model, offline.device) == ("offline", "SmolLM2-135M-Instruct", "cpu")
    folder = tmp_path / "my-model"
    folder.mkdir()
    (folder / "config.json").write_text("{}", encoding="utf-8")
    local = make_backend("local", model_path=folder, device="cpu", engine="torch")
    assert (local.name, local.model) == ("local", "my-model")
    with pytest.raises(LLMError, match="OPENAI_API_KEY"):
        make_backend("openai")
    server = make_backend("openai", base_url="http://127.0.0.1:9/v1", model="m", concurrency=3)
    assert (server.name, server.model, server.max_concurrency) == ("openai", "m", 3) and server.secrets == ()


def test_an_api_key_is_read_from_the_specs_variable_and_never_shown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DPKPS_TEST_KEY", SECRET)
    backend = make_backend("openai", api_key_env="DPKPS_TEST_KEY")
    assert backend.secrets == (SECRET,) and SECRET not in repr(backend) and SECRET not in json.dumps(backend.describe())
    assert SECRET not in repr(BackendRequest(api_key=SECRET))
    assert SECRET not in repr(backend_spec("openai"))  # a spec names a variable, never a key


def test_the_cli_choices_and_the_app_options_are_the_registry() -> None:
    assert _backend_choices("generate") == _backend_choices("compare") == backend_kinds()
    assert generation_steps.backend_options() == list(backend_kinds())
    assert [generation_steps.backend_label(k) for k in backend_kinds()] == [backend_spec(k).label
                                                                           for k in backend_kinds()]
    assert backend_help().startswith("offline = bundled SmolLM2-135M-Instruct (no key); local = ")


def test_a_new_backend_is_one_registration(fake_kind: BackendSpec, tmp_path: Path,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    assert backend_kinds()[-1] == "fake" and backend_spec("fake") is fake_kind
    assert _backend_choices("generate")[-1] == _backend_choices("compare")[-1] == "fake"
    assert generation_steps.backend_options()[-1] == "fake"
    assert generation_steps.backend_label("fake") == "A scripted test backend"
    assert isinstance(make_backend("fake", concurrency=2), FakeBackend)
    with pytest.raises(SystemExit):
        main(["generate", "--help"])
    assert "fake = scripted replies (tests)" in " ".join(capsys.readouterr().out.split())
    # the CLI writes with it: no other file knows the kind
    run = make_run_dir(tmp_path, 3)
    rc = main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", "fake", "--doc-type", "a note",
               "--quiet", "--retries", "0"])
    assert rc == 0, capsys.readouterr().err
    docs = [json.loads(x) for x in (run / "documents.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(docs) == 3 and all(d["text"].startswith("Document number") for d in docs)
    assert "--model-path is for --backend local" in _refusal(capsys, run, "fake", "--model-path", str(tmp_path))


def _refusal(capsys: pytest.CaptureFixture[str], run: Path, kind: str, *extra: str) -> str:
    """The one-line error of a refused ``generate`` (exit status 2)."""
    assert main(["generate", "--sequences", str(run / "sequences.jsonl"), "--backend", kind, "--doc-type", "a note",
                 "--quiet", *extra]) == 2
    return capsys.readouterr().err


def test_the_registry_refuses_bad_specs_and_unknown_kinds() -> None:
    def build(request: BackendRequest) -> LLMBackend:
        raise AssertionError("never built")

    good = dict(name="x", label="X", help="x", build=build, runs_here=False)
    with pytest.raises(ParameterError, match="already registered"):
        register_backend(BackendSpec(**{**good, "name": "openai"}))
    for bad, message in (({"name": "Bad Name"}, "lowercase"), ({"label": " "}, "label"), ({"build": None}, "factory"),
                         ({"runs_here": "yes"}, "True or False"), ({"settings": ("gpu",)}, "Unknown setting"),
                         ({"api_key_env": "X_KEY"}, "api_key")):
        with pytest.raises(ParameterError, match=message):
            BackendSpec(**{**good, **bad})
    assert set(BACKEND_SETTINGS) >= {"model_path", "model", "base_url", "api_key"}
    with pytest.raises(ParameterError, match="Unknown LLM backend 'nope'; choose one of offline, local, openai"):
        make_backend("nope")
    with pytest.raises(ParameterError, match="cannot be removed"):
        unregister_backend(DEFAULT_BACKEND)
    with pytest.raises(ParameterError, match="No LLM backend named"):
        unregister_backend("nope")
    with pytest.raises(SystemExit):
        build_parser().parse_args(["generate", "--sequences", "s", "--doc-type", "d", "--backend", "nope"])


class _CannedBackend(LLMBackend):
    """A plug-in's remote backend for the page test: one fixed reply (never sees a key)."""

    name = "canned"
    model = "canned-1"

    def generate(self, messages, *, max_tokens, temperature, timeout):  # type: ignore[no-untyped-def]
        return "A short report about the weekend match and the weather in the city."


@pytest.mark.model
@pytest.mark.assets
@pytest.mark.slow
@pytest.mark.usefixtures("fast_env")
def test_page6_offers_a_registered_backend_with_only_its_own_fields(tmp_path: Path) -> None:
    spec = register_backend(BackendSpec(name="canned", label="Canned replies (plug-in)", help="canned replies",
                                        build=lambda request: _CannedBackend(), runs_here=False, settings=("model",)))
    try:
        at = new_app()
        upload_corpus(at, toy_csv(20), "toy.csv")
        walk(at, "sequences")
        goto(at, "generate")
        radio = at.radio(key="_w.backend")
        assert list(radio.options) == [backend_spec(k).label for k in backend_kinds()] and spec.name in backend_kinds()
        radio.set_value("canned").run()
        assert_clean(at)
        keys = {w.key for w in at.text_input}
        assert "_w.llm_model" in keys and not {"_w.base_url", "_w.api_key", "_w.local_model_path"} & keys
        at.number_input(key="_w.n_documents").set_value(2).run()
        click(at, "Write documents (2 to go)")
        job = wait_job(at, "generation")
        assert job.error is None and job.result.written == 2, job.error
        audit = (Path(state_of(at).run.run_dir) / "audit_log.jsonl").read_text(encoding="utf-8")
        assert '"backend":"canned"' in audit
    finally:
        unregister_backend("canned")
