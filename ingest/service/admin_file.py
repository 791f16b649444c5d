"""Where a store's owner publishes its admin endpoint, in its own light module: the
commands that read it (`query`, the analyses) must not import the aiohttp server."""

from __future__ import annotations

ADMIN_FILE = ".holonograph-admin.json"
