"""DNS as the service asks it: non-blocking lookups through the configured resolvers (``lookups``)
and, for the diagnosis, the zone's own nameservers found by walking the delegation (``authority``).

May import: the base modules of core/. Nothing else in core/ is below it.
"""
