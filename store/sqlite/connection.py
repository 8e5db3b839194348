"""The SQLite connection the repositories use (``store.db``, the ``db`` each repository is given):
sqlite-utils' ``Database`` over the connection ``Store`` opens and configures. The store reads and
writes through its ``execute`` and ``conn`` only, with transactions begun and ended by ``Store``.
"""

from __future__ import annotations

from sqlite_utils import Database

__all__ = ["Database"]
