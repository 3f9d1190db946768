#!/usr/bin/env python3
"""Imports tt-model.yaml's runtime.app (tt-model/rfdetr_tt_app) the two ways tt-model does, with real uvicorn.

Usage: check-tt-app.py --python <interpreter that has uvicorn>   (scripts/check-ttnn.sh makes one)

1. The image-build check (`python -c`, after `import uvicorn`): the import must return, expose `app`, and run
   nothing.
2. Serving (`python -m uvicorn --host 0.0.0.0 --port P --lifespan on rfdetr_tt_app.app:app`): the import must
   replace the process (same PID) with `<root>/dist/rfdetr/bin/rfdetr serve --host 0.0.0.0 --port P --engine
   tt`. A stand-in rfdetr records its PID and argv.
"""

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "tt-model" / "rfdetr_tt_app"
PORT = "23456"


def stage(root: Path) -> Path:
    shutil.copytree(PACKAGE, root / "rfdetr_tt_app", ignore=shutil.ignore_patterns("__pycache__"))
    stub = root / "dist" / "rfdetr" / "bin" / "rfdetr"
    stub.parent.mkdir(parents=True)
    stub.write_text('#!/bin/sh\necho "$$ $*" > "$RFDETR_APP_CHECK_OUT"\n')
    stub.chmod(0o755)
    return root / "argv.txt"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--python", required=True)
    py = ap.parse_args().python
    with tempfile.TemporaryDirectory(prefix="rfdetr-tt-app.") as tmp:
        root = Path(tmp)
        out = stage(root)
        env = dict(os.environ, RFDETR_APP_CHECK_OUT=str(out), PYTHONDONTWRITEBYTECODE="1")

        verify = ("import fastapi, uvicorn, pydantic; import importlib; mod = importlib.import_module('rfdetr_tt_app.app'); "
                  "assert hasattr(mod, 'app'), 'no app'; print('imported')")
        r = subprocess.run([py, "-c", verify], cwd=root, env=env, capture_output=True, text=True, timeout=30)
        if r.returncode != 0 or r.stdout.strip() != "imported":
            print(f"check-tt-app: the build-time import failed (exit {r.returncode}): {r.stdout}{r.stderr}", file=sys.stderr)
            return 1
        if out.exists():
            print(f"check-tt-app: the build-time import ran rfdetr: {out.read_text()}", file=sys.stderr)
            return 1

        p = subprocess.Popen([py, "-m", "uvicorn", "--host", "0.0.0.0", "--port", PORT, "--lifespan", "on",
                              "rfdetr_tt_app.app:app"], cwd=root, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True)
        try:
            stdout, stderr = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            print("check-tt-app: uvicorn kept running: the app module did not hand the process over", file=sys.stderr)
            return 1
        if not out.exists():
            print(f"check-tt-app: uvicorn exited {p.returncode} without running rfdetr: {stdout}{stderr}", file=sys.stderr)
            return 1
        pid, _, argv = out.read_text().strip().partition(" ")
        want = f"serve --host 0.0.0.0 --port {PORT} --engine tt"
        if argv != want:
            print(f"check-tt-app: rfdetr got '{argv}', expected '{want}'", file=sys.stderr)
            return 1
        if int(pid) != p.pid:
            print(f"check-tt-app: rfdetr ran as PID {pid}, uvicorn was {p.pid}: a child, not an exec", file=sys.stderr)
            return 1
    print(f"check-tt-app: OK (build-time import touches nothing; uvicorn --port {PORT} execs rfdetr {want})", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
