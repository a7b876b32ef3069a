"""Settings: the model endpoint, a model per task, the API key's whereabouts, budget and recipe.

Values are stored with QSettings (engine/settings.py lists them); a value set in the environment wins and
is shown read-only with the variable's name. The API key is never shown and never written to a
file: the pane says whether one is set (environment or OS keychain) and can store one in the
keychain when the optional `keyring` package is installed. "Test connection" makes one tiny call
of each kind the endpoint will get (extraction, planner, reranker, answer, judge; each with its
task's model) off the GUI thread, and shows which structured-output mode the endpoint takes.
"""

from __future__ import annotations

from typing import Any, cast

from PySide6.QtCore import Qt
from PySide6.QtWidgets import (
    QComboBox,
    QFormLayout,
    QGroupBox,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QLineEdit,
    QPushButton,
    QScrollArea,
    QSpinBox,
    QVBoxLayout,
    QWidget,
)

from engine.memory import MemoryEngine
from engine.retrieve.recipes import RECIPES
from engine.settings import BY_NAME, TASK_MODELS, SettingsStore, keychain_available, keychain_set
from ui.panes.base import PaneBase

# what each structured-output mode means for the operator
MODE_NOTES = {
    "json_schema": "json_schema (the server enforces the schema)",
    "json_object": "json_object (JSON enforced; the schema is in the prompt and checked on arrival)",
    "prompt": "prompt only (no structured output: the schema is in the prompt, every reply is checked)",
}


def ask_secret(parent: QWidget, title: str, label: str) -> str | None:
    """Ask for a secret (masked). Tests replace this."""
    text, ok = QInputDialog.getText(parent, title, label, QLineEdit.EchoMode.Password)
    return text if ok and text else None


def describe_check(r: dict[str, Any]) -> str:
    """MemoryEngine.check_endpoint's report as the lines the pane shows."""
    ok = sum(1 for c in r["calls"] if c["ok"])
    head = (f"Connected: all {ok} calls answered." if r["ok"] else
            f"Failed: {len(r['calls']) - ok} of {len(r['calls'])} calls." if ok == 0 else
            f"Partly working: {ok} of {len(r['calls'])} calls answered.")
    lines = [head]
    for model, mode in r["modes"].items():
        refused = sorted({f.split(" refused")[0] for c in r["calls"] if c["model"] == model
                          for f in c["fallbacks"] if " refused" in f})
        note = MODE_NOTES.get(mode or "", "not settled (no call got an answer)")
        lines.append(f"Structured output for {model}: {note}" + (f"; refused: {', '.join(refused)}" if refused else ""))
    models = r["models"]
    lines.append("/v1/models lists nothing (local servers often don't)" if models == [] else
                 "/v1/models could not be read" if models is None else f"/v1/models lists: {', '.join(models[:6])}")
    for c in r["calls"]:
        took = f" in {c['latency_ms'] / 1000:.1f} s" if c["requests"] else ""
        lines.append(f"{c['task']} ({c['model']}): " + ("ok" if c["ok"] else c["line"]) + took)
    return "\n".join(lines)


class SettingsPane(PaneBase):
    pane_key = "settings"
    title = "Settings"
    watched_tables = frozenset({"meta"})

    def __init__(self, parent=None) -> None:
        super().__init__(parent)
        self.store: SettingsStore | None = None
        self._runner = None
        self.fields: dict[str, QWidget] = {}
        scroll = QScrollArea(self)
        scroll.setWidgetResizable(True)
        scroll.setFrameShape(QScrollArea.Shape.NoFrame)
        body = QWidget(scroll)
        layout = QVBoxLayout(body)
        scroll.setWidget(body)
        self.root_layout.addWidget(scroll, 1)

        self.env_note = QLabel("", body)
        self.env_note.setWordWrap(True)
        self.env_note.setProperty("role", "muted")
        layout.addWidget(self.env_note)
        endpoint = QGroupBox("Model endpoint (OpenAI-compatible)", body)
        form = QFormLayout(endpoint)
        self._line(form, "llm_base_url", "Base URL", "e.g. http://localhost:11434/v1 or https://api.openai.com/v1")
        self._line(form, "llm_model", "Default model", "used for every task without its own model")
        timeout = QSpinBox(endpoint)
        timeout.setRange(1, 3600)
        timeout.setSuffix(" s")
        self.fields["llm_timeout"] = timeout
        form.addRow("Timeout", timeout)
        key_row = QHBoxLayout()
        self.key_status = QLabel("", endpoint)
        key_row.addWidget(self.key_status, 1)
        self.key_store = QPushButton("Store in keychain…", endpoint)
        self.key_forget = QPushButton("Remove from keychain", endpoint)
        key_row.addWidget(self.key_store)
        key_row.addWidget(self.key_forget)
        form.addRow("API key", key_row)
        test_row = QHBoxLayout()
        self.test_button = QPushButton("Test connection", endpoint)
        test_row.addWidget(self.test_button)
        self.test_result = QLabel("", endpoint)
        self.test_result.setWordWrap(True)
        self.test_result.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        test_row.addWidget(self.test_result, 1)
        form.addRow("", test_row)
        layout.addWidget(endpoint)

        models = QGroupBox("Model per task", body)
        mform = QFormLayout(models)
        for label, name in TASK_MODELS:
            self._line(mform, name, label, "(default model)" if name != "embed_model" else "(when the embedder is openai)")
        combo = QComboBox(models)
        for choice in BY_NAME["embedder"].choices:
            combo.addItem(choice, choice)
        self.fields["embedder"] = combo
        mform.addRow("Embedder", combo)
        self._line(mform, "embed_base_url", "Embedding URL", "(the endpoint above)")
        layout.addWidget(models)

        recall = QGroupBox("Queries from the inspector", body)
        rform = QFormLayout(recall)
        budget = QSpinBox(recall)
        budget.setRange(50, 200_000)
        budget.setSingleStep(100)
        self.fields["token_budget"] = budget
        rform.addRow("Token budget", budget)
        recipe = QComboBox(recall)
        for name in RECIPES:
            recipe.addItem(name, name)
        self.fields["recipe"] = recipe
        rform.addRow("Recipe", recipe)
        layout.addWidget(recall)

        buttons = QHBoxLayout()
        self.save_button = QPushButton("Save", body)
        self.revert_button = QPushButton("Revert", body)
        self.saved_label = QLabel("", body)
        self.saved_label.setProperty("role", "muted")
        buttons.addWidget(self.save_button)
        buttons.addWidget(self.revert_button)
        buttons.addWidget(self.saved_label, 1)
        layout.addLayout(buttons)
        note = QLabel("Environment variables win over these values. Engine changes (embedder, endpoint) apply "
                      "when a database is next opened.", body)
        note.setWordWrap(True)
        note.setProperty("role", "muted")
        layout.addWidget(note)
        layout.addStretch(1)

        self.save_button.clicked.connect(self.save)
        self.revert_button.clicked.connect(self.load_values)
        self.test_button.clicked.connect(self.run_test)
        self.key_store.clicked.connect(self._store_key)
        self.key_forget.clicked.connect(self._forget_key)

    def _line(self, form: QFormLayout, name: str, label: str, placeholder: str) -> None:
        edit = QLineEdit(form.parentWidget())
        edit.setPlaceholderText(placeholder)
        edit.setToolTip(f"{BY_NAME[name].help} (${BY_NAME[name].env})")
        self.fields[name] = edit
        form.addRow(label, edit)

    # protocol -------------------------------------------------------------------------------------------
    def use_settings(self, store: SettingsStore, runner=None) -> None:
        """The window hands every pane that wants them its settings store (and its runner, for the
        connection test when no database is open)."""
        self.store = store
        self._runner = runner
        self.load_values()

    def refresh(self) -> None:
        if self.store is not None:
            self.load_values()

    # values -------------------------------------------------------------------------------------------------
    def load_values(self) -> None:
        st = self.store
        if st is None:
            return
        for name, widget in self.fields.items():
            value = st.get(name)
            source = st.source(name)
            setting = BY_NAME[name]
            from_env = source == "environment"
            if isinstance(widget, QLineEdit):
                widget.setText(value or "")
            elif isinstance(widget, QComboBox):
                i = widget.findData(value)
                widget.setCurrentIndex(max(i, 0))
            elif isinstance(widget, QSpinBox):
                widget.setValue(st.get_int(name) or int(setting.default or 0))
            widget.setEnabled(not from_env)
            widget.setToolTip(f"{setting.help}. Set by ${setting.env} in the environment." if from_env
                              else f"{setting.help} (${setting.env} overrides it)")
        env_set = [f"${BY_NAME[n].env}" for n in self.fields if st.source(n) == "environment"]
        self.env_note.setText("Set in the environment (read-only here): " + ", ".join(env_set) if env_set else "")
        self.env_note.setVisible(bool(env_set))
        self._show_key_state()
        self.saved_label.setText("")

    def _show_key_state(self) -> None:
        st = self.store
        if st is None:
            return
        source = st.source("llm_api_key")
        if source == "environment":
            text = "set (environment: $MEMLENS_LLM_API_KEY)"
        elif source == "keychain":
            text = "set (OS keychain)"
        elif st.has_api_key():
            text = "set (environment: $OPENAI_API_KEY, sent to OpenAI hosts only)"
        else:
            text = "not set (local servers need none)"
        self.key_status.setText(text)
        has_keychain = keychain_available()
        self.key_store.setEnabled(has_keychain and source != "environment")
        self.key_forget.setEnabled(has_keychain and source == "keychain")
        if not has_keychain:
            self.key_store.setToolTip("Install the optional 'keyring' package to keep a key in the OS keychain, "
                                      "or set $MEMLENS_LLM_API_KEY.")

    def save(self) -> None:
        st = self.store
        if st is None:
            return
        try:
            for name, widget in self.fields.items():
                if not widget.isEnabled():
                    continue
                if isinstance(widget, QLineEdit):
                    value = widget.text().strip() or None
                elif isinstance(widget, QComboBox):
                    value = widget.currentData()
                else:
                    value = str(cast(QSpinBox, widget).value())
                if value == BY_NAME[name].default:
                    value = None  # keep following the default
                st.set(name, value)
        except (ValueError, RuntimeError) as exc:
            self.banner.show_notice(f"Not saved: {exc}", "error")
            return
        self.banner.clear()
        self.saved_label.setText("Saved.")

    def _store_key(self) -> None:
        secret = ask_secret(self, "API key", "API key for the model endpoint (kept in the OS keychain):")
        if secret is None:
            return
        if not keychain_set("llm_api_key", secret):
            self.banner.show_notice("The OS keychain refused the key. Set $MEMLENS_LLM_API_KEY instead.", "error")
        self._show_key_state()

    def _forget_key(self) -> None:
        keychain_set("llm_api_key", None)
        self._show_key_state()

    # test connection ------------------------------------------------------------------------------------
    def run_test(self) -> None:
        st = self.store
        if st is None:
            return
        self.save()
        config = st.llm_config()
        if config is None:
            self.test_result.setText("No endpoint set: enter a base URL (or set $MEMLENS_LLM_BASE_URL). Without one, "
                                     "memlens uses heuristic extraction and no planner or reranker.")
            return
        runner = self.ctx.runner if self.ctx is not None else self._runner
        if runner is None:
            self.test_result.setText("No task runner: open a database first.")
            return
        self.test_button.setEnabled(False)
        self.test_result.setText(f"Calling {config.base_url}: one tiny call of each kind …")
        def done(result: dict[str, Any]) -> None:
            if not self._closed:
                self._tested(result)

        def failed(exc: BaseException) -> None:
            if not self._closed:
                self._test_failed(exc)

        runner.run(lambda _p, _s: MemoryEngine.check_endpoint(config), done, failed)

    def _tested(self, r: dict[str, Any]) -> None:
        self.test_button.setEnabled(True)
        self.test_result.setText(describe_check(r))

    def _test_failed(self, exc: BaseException) -> None:
        self.test_button.setEnabled(True)
        self.test_result.setText(f"Failed: {exc.__class__.__name__}: {exc}")
