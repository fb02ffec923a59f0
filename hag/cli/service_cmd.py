"""`hag service`: the HTTP API (hag/service) in this process, until SIGTERM or Ctrl-C."""

from __future__ import annotations

import click

from hag.cli._common import note, ready


@click.command()
@click.option("--host", default=None, help="Address to bind (default HAG_SERVICE_HOST, 127.0.0.1).")
@click.option(
    "--port",
    type=click.IntRange(1, 65535),
    default=None,
    help="TCP port (default HAG_SERVICE_PORT, 8765).",
)
def service(host: str | None, port: int | None) -> None:
    """Serve retrieve, sessions, explain and health over HTTP (docs/service.md).

    One process: every client shares its pools, caches and resident sets. Every request
    must carry `Authorization: Bearer $HAG_SERVICE_TOKEN`; without the variable the service
    does not start. SIGTERM (or Ctrl-C) finishes the requests in flight, closes the
    database connections and exits 0.
    """
    from hag.config import get_config
    from hag.errors import ConfigError
    from hag.support import extras

    extras.require("service", "hag service")  # before anything touches the database
    config = get_config()
    token = config.service_token.get_secret_value() if config.service_token else ""
    if not token.strip():
        raise ConfigError("the service needs a bearer token: set HAG_SERVICE_TOKEN")
    ready()
    from hag.service import create_app
    from hag.service.wire import server_config

    bind = host or config.service_host
    at = f"{bind}:{config.service_port if port is None else port}"
    server = _server_class()(
        server_config(
            create_app(token),
            bind,
            config.service_port if port is None else port,
            log_level="warning",
            access_log=False,
            lifespan="on",
        )
    )
    from hag.vectors.embeddings import announce

    announce()  # which embedder the service embeds with (the offline default says so)
    note(f"hag service: listening on {at} (SIGTERM or Ctrl-C stops it)")
    server.run()


def _server_class() -> type:
    """uvicorn's Server, but a SIGTERM or SIGINT that stopped it gracefully is the end of
    it: the process exits 0 (uvicorn re-raises the signal after shutdown, which would make
    a stop an operator asked for look like a crash to systemd and to the shell)."""
    import signal
    from collections.abc import Iterator
    from contextlib import contextmanager

    import uvicorn

    class Server(uvicorn.Server):
        @contextmanager
        def capture_signals(self) -> Iterator[None]:
            stops = (signal.SIGINT, signal.SIGTERM)
            previous = {sig: signal.signal(sig, self.handle_exit) for sig in stops}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    return Server
