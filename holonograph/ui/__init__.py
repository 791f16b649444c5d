"""The live web UI (docs/ui.md): static files of this package, served by `serve` at
`/ui/` beside the HTTP API (the same port, TLS and connection limits), off with
`serve --no-ui`.

The page is a client of the HTTP API and nothing else: it holds no data and no secret,
so its files need no token; everything it shows it fetches from `/lens/*` and
`/holonograph/*` with the bearer token the user gives it, where the API's scopes decide
(read). Its policy lets it load and call only its own origin: no CDN, no inline script,
no frame, and the token (kept in the tab's session storage) is never put in a URL the
page requests.

`mount_ui` is a route seam (`ingest.service.routes.Mount`), like `holonograph.api`.
"""

from __future__ import annotations

from importlib import resources

from aiohttp import web

from ingest.service.routes import ApiContext

__all__ = ["UI_PATH", "mount_ui", "ui_files"]

UI_PATH = "/ui/"
_TYPES = {".html": "text/html", ".js": "text/javascript", ".css": "text/css"}
# Its own origin only; fetch() to the API on the same origin; inline SVG for charts.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self';"
    " img-src 'self' data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
_HEADERS = {
    "Content-Security-Policy": POLICY,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",
}


def ui_files() -> dict[str, tuple[bytes, str]]:
    """The UI's files by name, with their content types (read once, at mount)."""
    static = resources.files(__package__).joinpath("static")
    files: dict[str, tuple[bytes, str]] = {}
    for entry in static.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _TYPES:
            files[entry.name] = (entry.read_bytes(), _TYPES[suffix])
    return files


def mount_ui(app: web.Application, context: ApiContext) -> None:
    """`/ui/` (the shell), `/ui/<file>` (its modules and styles), and `/` and `/ui`
    redirecting to `/ui/`."""
    files = ui_files()

    async def redirect(request: web.Request) -> web.StreamResponse:
        raise web.HTTPFound(UI_PATH)

    async def serve_file(request: web.Request) -> web.Response:
        name = request.match_info.get("name") or "index.html"
        if name not in files:
            raise web.HTTPNotFound(text=f"no such file of the web UI: {name}\n")
        body, content_type = files[name]
        return web.Response(body=body, content_type=content_type, headers=_HEADERS)

    app.router.add_get("/", redirect)
    app.router.add_get("/ui", redirect)
    app.router.add_get(UI_PATH, serve_file)
    app.router.add_get(UI_PATH + "{name}", serve_file)
