"""PostgreSQL's machinery, when ``[storage] url`` names a database: the pool, its units of work and
the listener (``pool``), the schema migration for migration beside SQLite's (``schema``,
``schema_shared``), how ``q`` is asked of the trigram index (``text_index``), and the copy of a
SQLite database into an empty one (``copy``). The repositories (store/*.py) run on it unchanged."""
