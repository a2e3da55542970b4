"""``autoprofiler replies import``: a batch of LLM replies into the store's reply cache."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autoprofiler.cli.console import console, fail
from autoprofiler.cli.options import DEFAULT_STORE, StoreOption, checked
from autoprofiler.cli.stores import open_store

replies_app = typer.Typer(help="Import a batch of LLM replies into the store.")


def _replies_file(path: Path) -> None:
    if not path.is_file():
        raise ValueError(f"{path}: no such file" + (" (a folder)" if path.is_dir() else ""))


@replies_app.command("import")
def import_command(
    replies: Annotated[
        Path,
        typer.Argument(
            callback=checked(_replies_file),
            help="A batch result file, or JSONL of {custom_id, content, model}.",
        ),
    ],
    model: Annotated[
        str, typer.Option("--model", help="The model's name, where the file does not say it.")
    ] = "",
    store: StoreOption = DEFAULT_STORE,
) -> None:
    """Put the replies into the store's reply cache; optimize, learn and bench with
    --llm recorded:PROVIDER:MODEL then find them and call no server."""
    from autoprofiler.llm.batch import BatchError, import_replies

    with open_store(store) as db:
        try:
            count = import_replies(replies, db, model)
        except BatchError as exc:
            fail(str(exc))
    console.print(f"{count} replies imported into {store}", highlight=False)
