"""SQLite's machinery, the embedded default: the schema as first released and the migrations after
it (``schema_v1``, ``schema``), the connection the repositories use (``connection``), and WAL
checkpoints off the request path (``checkpoints``). The repositories (store/*.py) run on it unchanged."""
