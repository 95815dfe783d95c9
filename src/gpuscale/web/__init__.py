"""``gpuscale serve``: a local web page over :mod:`gpuscale.api` and :mod:`gpuscale.report`.

A Flask app (:func:`create_app`) with server-rendered Jinja2 templates and plotly.js served by the
app itself: no front-end build step, nothing fetched from a network. Needs the ``web`` extra
(``pip install gpuscale[web]``).
"""

from __future__ import annotations

import os
import socket
from collections.abc import Callable

from gpuscale.errors import InputError

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8050


def serve(
    *, host: str = DEFAULT_HOST, port: int = DEFAULT_PORT, announce: Callable[[str], None] = print
) -> None:
    """Serve the page until interrupted; ``announce`` gets the URL once the socket is bound
    (``port=0`` takes a free port, which the URL then names)."""
    try:
        from werkzeug.serving import make_server

        from gpuscale.web.app import create_app
    except ImportError as exc:
        raise InputError(
            f"gpuscale serve needs Flask ({exc.name} is missing): pip install 'gpuscale[web]'"
        ) from None
    try:
        # bound here, not by Werkzeug, which exits the process on a taken port
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        listener = socket.create_server((host, port), family=family)
    except OSError as exc:
        raise InputError(
            f"cannot listen on {host}:{port} ({os.strerror(exc.errno) if exc.errno else exc}); "
            "pick another --port or --host",
            field="port",
        ) from None
    with listener:  # the server works on its own duplicate of the socket
        server = make_server(host, port, create_app(), threaded=True, fd=listener.fileno())
    shown = f"[{host}]" if ":" in host else host
    announce(f"gpuscale: serving on http://{shown}:{server.port}/ (Ctrl-C stops)")
    try:
        server.serve_forever()
    except KeyboardInterrupt:  # Ctrl-C is how the page is meant to stop
        announce("gpuscale: stopped")
    finally:
        server.server_close()
