"""The ``autoprofiler`` command line.

``main`` holds the app and mounts the commands, one module per command or command group
(``problems``, ``evaluation`` for ``eval``, ``baselines``, ``tree``, ``profile``,
``optimize``, ``prompts``, ``replies``, ``learn``, ``bench``, ``report``). What they share has
a module of its own: ``console`` (where output goes, one-line errors), ``options`` (every
shared option, checked as it is parsed), ``selection`` (``--levels``/``--ids`` and loading
problems), ``stores``, ``profiling``, ``rewriting``, ``executors``, ``results`` (``--json``
and ``-o``), ``progress`` (a bar on a terminal, a line per finished item elsewhere), ``runlog``
(each problem's row as it finishes, and ``--resume``), ``verbosity`` (``-v``/``-q``) and
``command_group`` (usage errors as one line).
"""
