"""The `runtime.app` of tt-model.yaml (kind tt-dit-server): hands the process over to `rfdetr serve`.

tt-model launches this kind as `python -m uvicorn --host 0.0.0.0 --port <port> --lifespan on <runtime.app>`.
uvicorn imports this module before it binds anything; the import then replaces the process with
`rfdetr serve --host <host> --port <port> --engine tt` (os.execv: the same PID, no proxy hop), which logs
uvicorn's "Application startup complete" once it serves. The host and port are the ones uvicorn was given on
its command line, read from sys.argv the way uvicorn's own CLI reads them.

Imported any other way (tt-model's image-build check runs `python -c "import importlib; ...
import_module('rfdetr_tt_app.app')"`), it touches nothing and only exposes `app`, an ASGI callable that
answers 503 saying where the server is.
"""

import os
import sys
from pathlib import Path

# extra_code stages this package and dist/rfdetr side by side under one root (/opt/tt-metal in the image).
RFDETR = Path(__file__).resolve().parents[1] / "dist" / "rfdetr" / "bin" / "rfdetr"


def served_by_uvicorn(argv0: str) -> bool:
    """True when this interpreter is uvicorn's CLI: `python -m uvicorn` or the `uvicorn` console script."""
    p = Path(argv0)
    return p.name == "uvicorn" or (p.name == "__main__.py" and p.parent.name == "uvicorn")


def option(argv: list, name: str, default: str) -> str:
    """The value of `--name V` or `--name=V` (the last one wins, as with click)."""
    value = default
    for i, arg in enumerate(argv):
        if arg == name and i + 1 < len(argv):
            value = argv[i + 1]
        elif arg.startswith(name + "="):
            value = arg[len(name) + 1 :]
    return value


def serve_argv(argv: list) -> list:
    host = option(argv, "--host", "0.0.0.0")
    port = option(argv, "--port", "8000")  # uvicorn's own default
    return [str(RFDETR), "serve", "--host", host, "--port", port, "--engine", "tt"]


async def app(scope, receive, send):
    """Reached only if something other than uvicorn's CLI serves this module: say where the server is."""
    if scope["type"] != "http":
        return
    body = (
        b"rfdetr_tt_app hands the process to `rfdetr serve` when uvicorn's CLI imports it; "
        b"it was imported another way, so nothing serves here. Run: " + str(RFDETR).encode() + b" serve --engine tt\n"
    )
    await send({"type": "http.response.start", "status": 503,
                "headers": [(b"content-type", b"text/plain; charset=utf-8")]})
    await send({"type": "http.response.body", "body": body})


if served_by_uvicorn(sys.argv[0]):
    argv = serve_argv(sys.argv[1:])
    if not RFDETR.is_file():
        sys.exit(f"rfdetr_tt_app: {RFDETR} is missing: the image's extra_code did not stage dist/rfdetr beside this "
                 "package (scripts/container-build.sh --bundle-libs, then tt-model package)")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(argv[0], argv)
