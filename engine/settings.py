"""Settings: one typed, documented list. Environment variables win over stored values.

The inspector stores values with QSettings (ui/qsettings.py opens it); the CLI and the engine read
the environment. API keys are never written to a settings file: they come from the environment
or, when the optional `keyring` package is installed, from the OS keychain.

The list lives in the engine, below every reader of it (the engine's own configuration, the CLI,
the inspector). `SettingsStore` is the one reader/writer the UI uses; it is handed any
QSettings-like object (value / setValue / remove / sync), so this module never imports Qt.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import platformdirs

from .paths import CACHE_DIR_ENV, RESOURCES_ENV
from .retrieve.recipes import RECIPES

if TYPE_CHECKING:
    from .embed.base import Embedder
    from .llm import LLMConfig

KEYRING_SERVICE = "memlens"


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    env: str
    default: str | None
    help: str
    secret: bool = False
    kind: str = "str"  # str | int | choice
    choices: tuple[str, ...] = ()


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "MEMLENS_DB", None, "the database file (default: the platform's user data directory)"),
    Setting("llm_base_url", "MEMLENS_LLM_BASE_URL", None,
            "OpenAI-compatible endpoint for extraction, planning, reranking, answering and judging "
            "(OPENAI_BASE_URL is read when unset)"),
    Setting("llm_api_key", "MEMLENS_LLM_API_KEY", None,
            "API key for that endpoint (OPENAI_API_KEY is read when unset); environment or OS keychain only",
            secret=True),
    Setting("llm_model", "MEMLENS_LLM_MODEL", None, "the default chat model for every LLM task"),
    Setting("llm_timeout", "MEMLENS_LLM_TIMEOUT", "60",
            "seconds to wait for one model answer (a local server on a CPU may need minutes)", kind="int"),
    Setting("llm_model_extract", "MEMLENS_LLM_MODEL_EXTRACT", None, "model for fact extraction"),
    Setting("llm_model_plan", "MEMLENS_LLM_MODEL_PLAN", None, "model for the retrieval planner"),
    Setting("llm_model_rerank", "MEMLENS_LLM_MODEL_RERANK", None, "model for the reranker"),
    Setting("llm_model_answer", "MEMLENS_LLM_MODEL_ANSWER", None, "model that answers benchmark questions"),
    Setting("llm_model_judge", "MEMLENS_LLM_MODEL_JUDGE", None, "model that judges benchmark answers"),
    Setting("embedder", "MEMLENS_EMBEDDER", "local", "local (default), openai, or hashing (tests only)",
            kind="choice", choices=("local", "openai", "hashing")),
    Setting("embed_model", "MEMLENS_EMBED_MODEL", None, "embedding model name when the embedder is openai"),
    Setting("embed_base_url", "MEMLENS_EMBED_BASE_URL", None, "embedding endpoint if it differs from the LLM one"),
    Setting("token_budget", "MEMLENS_TOKEN_BUDGET", "800", "context token budget for queries run from the inspector",
            kind="int"),
    Setting("recipe", "MEMLENS_RECIPE", "default", "retrieval recipe for queries run from the inspector",
            kind="choice", choices=tuple(RECIPES)),
    Setting("settings_file", "MEMLENS_SETTINGS_FILE", None,
            "an INI file for the inspector's settings instead of the platform store (portable use, tests)"),
    Setting("debug", "MEMLENS_DEBUG", None, "1: an internal error of a command shows its traceback"),
    Setting("resources", RESOURCES_ENV, None,
            "the directory of the bundled model and fonts (default: beside the code, or in the packaged app)"),
    Setting("cache_dir", CACHE_DIR_ENV, None,
            "where memlens keeps what it can recompute, such as `memlens perf --data`'s vector cache "
            "(default: the platform's per-user cache folder)"),
    Setting("report_ready", "MEMLENS_REPORT_READY", None,
            "1: `memlens gui` says on stderr when its first page of data is up and the model loaded "
            "(set by `python -m app.latency_probe --first-window`)"),
)

BY_NAME = {s.name: s for s in SETTINGS}
# The model per LLM task, as the settings pane lists them (task label, setting name).
TASK_MODELS = (("Extraction", "llm_model_extract"), ("Embedding", "embed_model"), ("Planner", "llm_model_plan"),
               ("Reranker", "llm_model_rerank"), ("Answer", "llm_model_answer"), ("Judge", "llm_model_judge"))


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("MEMLENS_DB"):
        return Path(env["MEMLENS_DB"]).expanduser()
    # The platform's per-user data folder: $XDG_DATA_HOME (~/.local/share) on Linux, Application
    # Support on macOS, the roaming AppData on Windows.
    return Path(platformdirs.user_data_dir("memlens", appauthor=False, roaming=True)) / "memlens.db"


def value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    """The environment's value or the default (no stored settings: the CLI's view)."""
    env = os.environ if environ is None else environ
    s = BY_NAME.get(name)
    if s is None:
        raise KeyError(name)
    return env.get(s.env) or s.default


# keychain ----------------------------------------------------------------------------------------
def _keyring() -> Any:  # the keyring module, or None
    try:
        import keyring  # optional dependency
    except Exception:  # noqa: BLE001 - absent or broken: there is no keychain
        return None
    return keyring


def keychain_available() -> bool:
    return _keyring() is not None


def keychain_get(name: str) -> str | None:
    kr = _keyring()
    if kr is None:
        return None
    try:
        return kr.get_password(KEYRING_SERVICE, name) or None
    except Exception:  # noqa: BLE001 - a locked or missing backend means "not set"
        return None


def keychain_set(name: str, secret: str | None) -> bool:
    """Store (or with None delete) a secret in the OS keychain; False when there is no usable keychain."""
    kr = _keyring()
    if kr is None:
        return False
    try:
        if secret:
            kr.set_password(KEYRING_SERVICE, name, secret)
        else:
            try:
                kr.delete_password(KEYRING_SERVICE, name)
            except Exception:  # noqa: BLE001 - nothing to delete
                pass
    except Exception:  # noqa: BLE001
        return False
    return True


_SHARED_LOCAL: Embedder | None = None  # the bundled embedder, shared by every database the app opens
_SHARED_LOCK = threading.Lock()


class SettingsStore:
    """Typed settings over QSettings with environment override; secrets via env or keychain only."""

    GROUP = "settings/"

    def __init__(self, qsettings: Any, environ: Mapping[str, str] | None = None) -> None:
        self.qs = qsettings
        self._env = environ

    @property
    def env(self) -> Mapping[str, str]:
        return os.environ if self._env is None else self._env

    def _setting(self, name: str) -> Setting:
        try:
            return BY_NAME[name]
        except KeyError:
            raise KeyError(f"unknown setting {name!r}") from None

    def _env_value(self, s: Setting) -> str | None:
        v = self.env.get(s.env)
        if not v and s.name == "llm_base_url":
            v = self.env.get("OPENAI_BASE_URL")
        return v or None

    def source(self, name: str) -> str:
        """Where the value comes from: environment, keychain, stored, default or unset."""
        s = self._setting(name)
        if self._env_value(s):
            return "environment"
        if s.secret:
            return "keychain" if keychain_get(s.name) else "unset"
        stored = self.qs.value(self.GROUP + name)
        if stored not in (None, ""):
            return "stored"
        return "default" if s.default is not None else "unset"

    def get(self, name: str) -> str | None:
        s = self._setting(name)
        env_value = self._env_value(s)
        if env_value:
            return env_value
        if s.secret:
            return keychain_get(s.name)
        stored = self.qs.value(self.GROUP + name)
        if stored not in (None, ""):
            return str(stored)
        return s.default

    def get_int(self, name: str) -> int | None:
        raw = self.get(name)
        try:
            return int(raw) if raw is not None else None
        except ValueError:
            default = self._setting(name).default
            return int(default) if default else None

    def set(self, name: str, value: str | None) -> None:
        """Store a value (None or "" clears it). Secrets go to the keychain or nowhere."""
        s = self._setting(name)
        if s.secret:
            if not keychain_set(s.name, value or None):
                raise RuntimeError("no OS keychain is available: set the key in the environment "
                                   f"({s.env}) instead; memlens never writes keys to a file")
            return
        if s.kind == "int" and value not in (None, ""):
            int(value)  # raises ValueError for the caller to show
        if s.kind == "choice" and value not in (None, "") and value not in s.choices:
            raise ValueError(f"{name} must be one of {', '.join(s.choices)}")
        if value in (None, ""):
            self.qs.remove(self.GROUP + name)
        else:
            self.qs.setValue(self.GROUP + name, str(value))
        self.qs.sync()

    def effective_environ(self) -> dict[str, str]:
        """The environment with stored settings (and a keychain key) filled in where it is silent.

        The engine reads its configuration from an environment mapping (LLMConfig.from_env,
        make_embedder), so handing it this one applies the engine's own rules, including that
        OPENAI_API_KEY is only ever sent to an OpenAI host.
        """
        out = {k: v for k, v in self.env.items() if isinstance(v, str)}
        for s in SETTINGS:
            if out.get(s.env):
                continue
            v = self.get(s.name)
            if v and (s.default is None or v != s.default or s.secret):
                out[s.env] = v
        return out

    def llm_config(self) -> LLMConfig | None:
        """The engine's LLMConfig for these settings, or None when no endpoint is set."""
        from engine.llm import LLMConfig

        return LLMConfig.from_env(self.effective_environ())

    def has_api_key(self) -> bool:
        """Whether the configured endpoint would be sent a key (never the key itself)."""
        config = self.llm_config()
        if config is not None:
            return bool(config.api_key)
        return bool(self.get("llm_api_key"))

    def make_embedder(self) -> Embedder:
        """The embedder the settings name. The bundled model is one instance for the whole app:
        opening another database does not load it again (its load holds the GIL ~30 ms)."""
        from engine.embed import make_embedder

        env = self.effective_environ()
        if (env.get("MEMLENS_EMBEDDER") or "local").strip().lower() != "local":
            return make_embedder(environ=env)
        global _SHARED_LOCAL
        with _SHARED_LOCK:
            if _SHARED_LOCAL is None:
                _SHARED_LOCAL = make_embedder("local")
            return _SHARED_LOCAL
