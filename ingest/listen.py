"""Start an aiohttp application on a TCP port and learn the port actually bound."""

from __future__ import annotations

from typing import Any

from aiohttp import web


async def start_site(runner: web.AppRunner, host: str, port: int) -> int:
    """Set up `runner`, listen on host:port (0 picks a free port), return the port."""
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    server: Any = site._server
    bound: int = server.sockets[0].getsockname()[1]
    return bound
