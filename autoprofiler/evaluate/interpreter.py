"""Fresh Python interpreters for the evaluator's own processes, blind to the folder they start in.

``python -c CODE`` puts the current directory first on the import path (``-m`` puts its full
path there). The evaluator's own processes (the trusted reference process, the zygotes, the
execute workers) start in whatever folder the user ran from, so a ``json.py``, a ``torch.py`` or
an older ``autoprofiler/`` there would be imported in place of the real one, into the process a
verdict depends on. These commands take that entry off ``sys.path`` before anything is imported
(``sys`` is built in); the package itself comes from ``PYTHONPATH``, as the callers set it.
"""

from __future__ import annotations

import sys

# Python 3.11's -P (PYTHONSAFEPATH) does the same, but not on 3.10.
_WITHOUT_START_FOLDER = "import sys\nsys.path[:] = [p for p in sys.path if p != '']\n"


def python_command(code: str, *args: str) -> list[str]:
    """``python -c code args``, the folder it starts in off the import path."""
    return [sys.executable, "-c", _WITHOUT_START_FOLDER + code, *args]


def main_command(module: str, *args: str) -> list[str]:
    """``module``'s ``main()`` in a fresh interpreter (its return value the exit status), the
    folder it starts in off the import path; ``args`` follow in ``sys.argv``."""
    return python_command(f"from {module} import main\nsys.exit(main())", *args)
