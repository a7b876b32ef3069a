"""Settings: one typed, documented list. Environment variables win over stored values.

The UI stores values with QSettings; the CLI and engine read the environment. API keys are
never stored in a plain settings file: they come from the environment (or the OS keychain
once the settings pane lands).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    env: str
    default: str | None
    help: str
    secret: bool = False


SETTINGS: tuple[Setting, ...] = (
    Setting("db", "MEMLENS_DB", None, "the database file (default: the platform's user data directory)"),
    Setting("llm_base_url", "MEMLENS_LLM_BASE_URL", None,
            "OpenAI-compatible endpoint for extraction, planning, reranking, answering and judging "
            "(OPENAI_BASE_URL is read when unset)"),
    Setting("llm_api_key", "MEMLENS_LLM_API_KEY", None, "API key for that endpoint (OPENAI_API_KEY is read when unset)",
            secret=True),
    Setting("llm_model", "MEMLENS_LLM_MODEL", None, "the default chat model for every LLM task"),
    Setting("llm_model_extract", "MEMLENS_LLM_MODEL_EXTRACT", None, "model for fact extraction"),
    Setting("llm_model_plan", "MEMLENS_LLM_MODEL_PLAN", None, "model for the retrieval planner"),
    Setting("llm_model_rerank", "MEMLENS_LLM_MODEL_RERANK", None, "model for the reranker"),
    Setting("llm_model_answer", "MEMLENS_LLM_MODEL_ANSWER", None, "model that answers benchmark questions"),
    Setting("llm_model_judge", "MEMLENS_LLM_MODEL_JUDGE", None, "model that judges benchmark answers"),
    Setting("embedder", "MEMLENS_EMBEDDER", "local", "local (default), openai, or hashing (tests only)"),
    Setting("embed_model", "MEMLENS_EMBED_MODEL", None, "embedding model name when the embedder is openai"),
    Setting("embed_base_url", "MEMLENS_EMBED_BASE_URL", None, "embedding endpoint if it differs from the LLM one"),
)


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    if env.get("MEMLENS_DB"):
        return Path(env["MEMLENS_DB"]).expanduser()
    if sys.platform == "win32":
        base = Path(env.get("APPDATA") or Path.home() / "AppData" / "Roaming")
    elif sys.platform == "darwin":
        base = Path.home() / "Library" / "Application Support"
    else:
        base = Path(env.get("XDG_DATA_HOME") or Path.home() / ".local" / "share")
    return base / "memlens" / "memlens.db"


def value(name: str, environ: Mapping[str, str] | None = None) -> str | None:
    env = os.environ if environ is None else environ
    for s in SETTINGS:
        if s.name == name:
            return env.get(s.env) or s.default
    raise KeyError(name)
