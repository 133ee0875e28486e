"""`ablate ui`: MLflow's own UI on the store a study logged to, with the addresses of ablate's views."""
from __future__ import annotations

import os
import socket
import sys
from pathlib import Path

from ablate.config.study import StudyError
from ablate.tracking import view
from ablate.tracking.tracker import study_views, tracking_uri


def serve(results: Path, port: int) -> int:
    """Replace this process with `mlflow ui` on `results`' store at 127.0.0.1:`port`, after one clear line for
    what would make it fail (a tracking server, no store yet, a port in use)."""
    _free(port)  # first: the store's own checks would not explain a busy port
    uri = tracking_uri(results)
    if view.served(uri):
        raise StudyError(f"MLFLOW_TRACKING_URI is a tracking server, {uri}: it serves the UI itself; "
                         "open it in a web browser (`ablate ui` serves a database or folder)")
    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        raise StudyError(f"no MLflow store at {uri.removeprefix('sqlite:///')}: run a study with "
                         f"--results {results} first, or pass the --results folder a run used")
    print(f"MLflow UI for {uri} at http://127.0.0.1:{port}")
    for name, address in study_views(uri, port).items():
        print(f"  {name}: {address}")
    sys.stdout.flush()  # exec replaces this process, buffer included
    os.execvp(sys.executable, [sys.executable, "-m", "mlflow", "ui", "--backend-store-uri", uri,
                               "--host", "127.0.0.1", "--port", str(port)])
    return 0


def _free(port: int) -> None:
    """One clear line when another program listens on `port`: mlflow's server would print the bind error and
    still exit 0."""
    with socket.socket() as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the UI's server does: TIME_WAIT is no obstacle
        try:
            probe.bind(("127.0.0.1", port))
        except OSError as error:
            raise StudyError(f"port {port} on 127.0.0.1 cannot be opened ({error.strerror}); "
                             f"choose another with --port, "
                             f"e.g. ablate ui --port {port + 1 if port < 65535 else 5001}") from None
