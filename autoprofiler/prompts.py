"""Prompt templates: package data files loaded by name, overridable from a user folder.

A template is looked up first in the folder named by ``AUTOPROFILER_PROMPTS_DIR`` (so a user can
change any prompt without editing the package), then in the ``prompts/`` folder of the package
that owns it. Templates are never also kept as strings in code.
"""

from __future__ import annotations

import logging
import os
from importlib import resources
from pathlib import Path

log = logging.getLogger(__name__)

PROMPTS_DIR_ENV = "AUTOPROFILER_PROMPTS_DIR"


class PromptError(ValueError):
    """A prompt template is missing or cannot be filled."""


def load_prompt(package: str, name: str) -> str:
    """The text of template ``name`` of ``package`` (e.g. ``autoprofiler.rewrite``)."""
    override = os.environ.get(PROMPTS_DIR_ENV)
    if override:
        path = Path(override) / name
        if path.is_file():
            log.debug("prompt %s from %s", name, path)
            return path.read_text(encoding="utf-8")
    resource = resources.files(package).joinpath("prompts", name)
    if not resource.is_file():
        raise PromptError(f"no prompt template named {name!r} in {package}")
    return resource.read_text(encoding="utf-8")
