"""Embedders: the local default, an OpenAI-compatible endpoint, and hashing (tests only)."""

from __future__ import annotations

import os
from collections.abc import Mapping

from ..errors import BadInput
from .base import Embedder

EMBEDDER_CHOICES = ("local", "openai", "hashing")


def make_embedder(name: str | None = None, environ: Mapping[str, str] | None = None) -> Embedder:
    """Build the embedder named by `name` or $MEMLENS_EMBEDDER (default: local)."""
    env = os.environ if environ is None else environ
    choice = (name or env.get("MEMLENS_EMBEDDER") or "local").strip().lower()
    if choice == "local":
        from .local import LocalEmbedder

        return LocalEmbedder()
    if choice == "hashing":
        from .hashing import HashingEmbedder

        return HashingEmbedder()
    if choice == "openai":
        from .openai_embed import OpenAIEmbedder

        base_url = env.get("MEMLENS_EMBED_BASE_URL") or env.get("MEMLENS_LLM_BASE_URL") or env.get("OPENAI_BASE_URL")
        model = env.get("MEMLENS_EMBED_MODEL")
        if not base_url or not model:
            raise BadInput("MEMLENS_EMBEDDER=openai needs MEMLENS_EMBED_MODEL and a base URL "
                           "(MEMLENS_EMBED_BASE_URL, MEMLENS_LLM_BASE_URL or OPENAI_BASE_URL)")
        api_key = env.get("MEMLENS_LLM_API_KEY") or env.get("OPENAI_API_KEY") or "not-needed"
        return OpenAIEmbedder(base_url=base_url, model=model, api_key=api_key)
    raise BadInput(f"unknown embedder {choice!r} (one of {', '.join(EMBEDDER_CHOICES)})")


__all__ = ["Embedder", "EMBEDDER_CHOICES", "make_embedder"]
