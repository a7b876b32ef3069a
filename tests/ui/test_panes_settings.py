"""Settings: typed, documented, stored in QSettings with the environment winning; the API key is
only ever read from the environment or a keychain; the connection test calls the endpoint."""

from __future__ import annotations

import sys
import types
from pathlib import Path

import pytest

from engine import settings as app_settings
from engine.settings import SETTINGS, SettingsStore
from tests.fixtures.openai_server import LLAMA_CPP_FORMATS, Reply, ScriptedOpenAIServer
from ui.panes.settings import SettingsPane
from ui.tasks import InlineRunner

from .shell_db import qsettings  # noqa: F401

pytestmark = pytest.mark.qt_log_ignore("This plugin does not support")


class FakeKeyring(types.ModuleType):
    def __init__(self) -> None:
        super().__init__("keyring")
        self.store: dict[tuple[str, str], str] = {}

    def get_password(self, service, name):
        return self.store.get((service, name))

    def set_password(self, service, name, value):
        self.store[(service, name)] = value

    def delete_password(self, service, name):
        self.store.pop((service, name), None)


def _pane(qtbot, store, runner=None):
    pane = SettingsPane()
    qtbot.addWidget(pane)
    pane.use_settings(store, runner or InlineRunner())
    return pane


def test_every_setting_is_documented_and_named_once():
    assert len({s.name for s in SETTINGS}) == len(SETTINGS) == len({s.env for s in SETTINGS})
    for s in SETTINGS:
        assert s.help and s.env.startswith("MEMLENS_"), s
        assert s.default is None or s.kind != "choice" or s.default in s.choices


def test_values_are_stored_and_the_environment_wins(qtbot, qsettings):
    store = SettingsStore(qsettings, environ={"MEMLENS_EMBEDDER": "hashing"})
    pane = _pane(qtbot, store)
    assert not pane.fields["embedder"].isEnabled() and "$MEMLENS_EMBEDDER" in pane.env_note.text()
    pane.fields["llm_base_url"].setText("http://127.0.0.1:9/v1")
    pane.fields["llm_model_extract"].setText("small-model")
    pane.fields["token_budget"].setValue(1200)
    pane.fields["recipe"].setCurrentIndex(pane.fields["recipe"].findData("lexical"))
    pane.save_button.click()
    assert pane.saved_label.text() == "Saved."
    fresh = SettingsStore(qsettings, environ={})
    assert fresh.get("llm_base_url") == "http://127.0.0.1:9/v1" and fresh.source("llm_base_url") == "stored"
    assert fresh.get("llm_model_extract") == "small-model" and fresh.get_int("token_budget") == 1200
    assert fresh.get("recipe") == "lexical" and fresh.get("embedder") == "local"  # env value never stored
    env_wins = SettingsStore(qsettings, environ={"MEMLENS_LLM_BASE_URL": "http://env/v1"})
    assert env_wins.get("llm_base_url") == "http://env/v1" and env_wins.source("llm_base_url") == "environment"
    config = fresh.llm_config()
    assert config.base_url == "http://127.0.0.1:9/v1" and config.task_models == {"EXTRACT": "small-model"}


def test_api_key_is_never_shown_or_written_to_the_settings_file(qtbot, qsettings, monkeypatch):
    monkeypatch.setitem(sys.modules, "keyring", None)  # no keychain, whatever is installed here
    secret = "sk-test-not-a-real-key-123456"
    store = SettingsStore(qsettings, environ={"MEMLENS_LLM_API_KEY": secret, "MEMLENS_LLM_BASE_URL": "http://x/v1"})
    pane = _pane(qtbot, store)
    assert pane.key_status.text().startswith("set (environment")
    assert secret not in pane.key_status.text()
    pane.fields["llm_model"].setText("some-model")
    pane.save()
    qsettings.sync()
    written = Path(qsettings.fileName()).read_text(encoding="utf-8")
    assert "some-model" in written and secret not in written
    with pytest.raises(RuntimeError, match="never writes keys to a file"):
        SettingsStore(qsettings, environ={}).set("llm_api_key", secret)  # no keychain here
    assert not any("api_key" in k for k in qsettings.allKeys())


def test_keychain_when_keyring_is_installed(qtbot, qsettings, monkeypatch):
    fake = FakeKeyring()
    monkeypatch.setitem(sys.modules, "keyring", fake)
    store = SettingsStore(qsettings, environ={"MEMLENS_LLM_BASE_URL": "http://127.0.0.1:9/v1"})
    pane = _pane(qtbot, store)
    assert pane.key_status.text().startswith("not set") and pane.key_store.isEnabled()
    monkeypatch.setattr("ui.panes.settings.ask_secret", lambda parent, title, label: "sk-from-keychain")
    pane.key_store.click()
    assert fake.store == {(app_settings.KEYRING_SERVICE, "llm_api_key"): "sk-from-keychain"}
    assert pane.key_status.text() == "set (OS keychain)" and store.llm_config().api_key == "sk-from-keychain"
    pane.key_forget.click()
    assert fake.store == {} and pane.key_status.text().startswith("not set")


def test_broken_keyring_degrades_to_not_set(qsettings, monkeypatch):
    class Broken(types.ModuleType):
        def get_password(self, *a):
            raise RuntimeError("no backend")

        def set_password(self, *a):
            raise RuntimeError("no backend")

    monkeypatch.setitem(sys.modules, "keyring", Broken("keyring"))
    store = SettingsStore(qsettings, environ={})
    assert store.get("llm_api_key") is None and store.source("llm_api_key") == "unset"
    assert app_settings.keychain_set("llm_api_key", "x") is False


REPLIES = {  # a valid answer to each kind of call, by the schema's name
    "memory_candidates": {"memories": []},
    "retrieval_plan": {"variants": ["Ana's city"], "entities": ["Ana"], "intent": "current", "as_of": None},
    "rerank": {"order": [1], "reason": "it says where she lives"},
    "answer": {"answer": "Lisbon"},
    "judgement": {"correct": True, "reason": "same city"},
}


def _by_schema(request):
    fmt = request.get("response_format") or {}
    if fmt.get("type") == "json_schema":
        return REPLIES[fmt["json_schema"]["name"]]
    text = request["messages"][-1]["content"]  # json_object / prompt: the schema is in the prompt
    name = next(n for n, key in (("memory_candidates", '"memories"'), ("retrieval_plan", '"variants"'),
                                 ("rerank", '"order"'), ("judgement", '"correct"'), ("answer", '"answer"'))
                if key in text.rsplit("JSON schema:", 1)[-1])
    return Reply.prose(REPLIES[name])


def test_connection_test_makes_one_call_of_each_kind(qtbot, qsettings, openai_server):
    store = SettingsStore(qsettings, environ={})
    pane = _pane(qtbot, store)
    pane.fields["llm_base_url"].setText(openai_server.base_url)
    pane.fields["llm_model"].setText("test-model")
    pane.fields["llm_model_judge"].setText("judge-model")
    openai_server.chat_responder = _by_schema
    pane.test_button.click()
    text = pane.test_result.text()
    assert text.startswith("Connected: all 5 calls answered.")
    assert "Structured output for test-model: json_schema" in text
    assert "/v1/models lists: test-model, test-embedding" in text
    for line in ("EXTRACT (test-model): ok", "PLAN (test-model): ok", "RERANK (test-model): ok",
                 "ANSWER (test-model): ok", "JUDGE (judge-model): ok"):
        assert line in text
    sent = [(r.json["model"], r.json["response_format"]["json_schema"]["name"]) for r in openai_server.chat_requests]
    assert sent == [("test-model", "memory_candidates"), ("test-model", "retrieval_plan"), ("test-model", "rerank"),
                    ("test-model", "answer"), ("judge-model", "judgement")]
    assert pane.test_button.isEnabled()


def test_connection_test_shows_the_mode_a_llama_cpp_server_takes(qtbot, qsettings):
    with ScriptedOpenAIServer(response_formats=LLAMA_CPP_FORMATS, models=()) as server:
        server.chat_responder = _by_schema
        pane = _pane(qtbot, SettingsStore(qsettings, environ={}))
        pane.fields["llm_base_url"].setText(server.base_url)
        pane.fields["llm_model"].setText("gemma3")
        pane.test_button.click()
    text = pane.test_result.text()
    assert text.startswith("Connected: all 5 calls answered.")
    assert "Structured output for gemma3: json_object" in text and "refused: json_schema" in text
    assert "/v1/models lists nothing" in text


def test_connection_test_failures_are_one_line_each(qtbot, qsettings, openai_server):
    pane = _pane(qtbot, SettingsStore(qsettings, environ={}))
    pane.fields["llm_base_url"].setText(openai_server.base_url)
    pane.fields["llm_model"].setText("test-model")
    openai_server.queue_chat(Reply.error(500, "boom"), Reply.text("not json"), Reply.text(""),
                             Reply.error(401, "Incorrect API key provided"))
    pane.test_button.click()
    lines = pane.test_result.text().splitlines()
    assert lines[0] == "Failed: 5 of 5 calls."
    assert lines[1].startswith("Structured output for test-model: json_schema")  # PLAN's 200 settled it
    assert lines[3].startswith("EXTRACT (test-model): http_500: boom")
    assert lines[4].startswith("PLAN (test-model): malformed_json")
    assert lines[5].startswith("RERANK (test-model): empty_response")
    assert lines[6].startswith("ANSWER (test-model): http_401: the endpoint refused the request")
    assert lines[7] == "JUDGE (test-model): not tried after http_401"
    assert pane.test_button.isEnabled()


def test_connection_test_without_an_endpoint_says_what_to_do(qtbot, qsettings):
    pane = _pane(qtbot, SettingsStore(qsettings, environ={}))
    pane.test_button.click()
    assert "No endpoint set" in pane.test_result.text()


def test_bad_values_are_refused_inline(qtbot, qsettings):
    store = SettingsStore(qsettings, environ={})
    with pytest.raises(ValueError):
        store.set("recipe", "nonsense")
    with pytest.raises(ValueError):
        store.set("token_budget", "lots")


def test_the_bundled_embedder_is_one_instance_for_every_database(qsettings):
    local = SettingsStore(qsettings, environ={})  # no choice: the bundled model
    first, second = local.make_embedder(), SettingsStore(qsettings, environ={"MEMLENS_EMBEDDER": "local"}).make_embedder()
    assert first is second and first.model == "all-MiniLM-L6-v2-int8"
    hashing = SettingsStore(qsettings, environ={"MEMLENS_EMBEDDER": "hashing"})
    assert hashing.make_embedder() is not hashing.make_embedder()  # cheap ones are made per database
