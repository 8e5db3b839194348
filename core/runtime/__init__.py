"""What runs the service: the services container built from the configuration (``assembly``),
the periodic jobs (``jobs``), and the operator's commands with their command line (``commands``,
``cli``).

May import: every package of core/ and store/; only handlers/ and app.py import it.
"""
