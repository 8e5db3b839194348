"""Reaching the outside: every request to a destination a user supplies goes through the guard
(``guard``, its rules in ``policy``: no private or loopback address unless ``[network]
allow_private_ranges`` says so); the HTTP client pools per outside system (``http``); the live
HTTPS scan of a hostname (``site_scan``); e-mail through ``[smtp]`` (``mail``).

May import: core.dns, the base modules of core/ and store/.
"""
