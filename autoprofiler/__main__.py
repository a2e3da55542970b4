"""``python -m autoprofiler``: the same as the ``autoprofiler`` command."""

from autoprofiler.cli.main import app

app(prog_name="autoprofiler")
