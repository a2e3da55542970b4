"""``python -m autoprofiler``: the same as the ``autoprofiler`` command."""

from autoprofiler.cli import app

app(prog_name="autoprofiler")
