"""How long a test waits for what should happen soon: a server to start, a request to be answered or
to arrive, a change to be seen.

Long enough that only a hang reaches it, never a busy machine: the whole suite once took 34 minutes
on a shared two-core machine, where one service took 15 s to start. A wait ends as soon as its
condition holds, so a long bound costs nothing when all is well. A whole async test, which may wait
several times, fails after 300 s (``--async-test-timeout`` in pyproject.toml's ``addopts``; pytest-tornado's
own default is 5 s).
"""

PATIENCE_SECONDS = 120.0
