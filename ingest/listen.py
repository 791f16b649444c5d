"""Start an aiohttp application on a TCP port and learn the port actually bound."""

from __future__ import annotations

from typing import Any

from aiohttp import web


class ListenError(OSError):
    """A listener cannot bind host:port (in use, or not an address of this host): a
    configuration problem, reported as such instead of a library traceback."""


async def start_site(runner: web.AppRunner, host: str, port: int) -> int:
    """Set up `runner`, listen on host:port (0 picks a free port), return the port."""
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    try:
        await site.start()
    except OSError as err:  # the caller owns `runner` and cleans it up
        raise ListenError(f"cannot listen on {host}:{port}: {err.strerror or err}") from err
    server: Any = site._server
    bound: int = server.sockets[0].getsockname()[1]
    return bound
