"""What runs the service: the services container built from the configuration (``assembly``),
the periodic jobs (``jobs``), the operator's commands with their command line (``commands``,
``cli``), and the listening sockets, bound before the rest is imported (``sockets``).

May import: every package of core/ and store/; only handlers/ and app.py import it.
"""
