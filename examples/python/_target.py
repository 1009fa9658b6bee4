"""Where the examples run: the Consul at CONSUL_HTTP_ADDR, or a dev server they start."""

import contextlib
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def consul_address():
    """Yields host:port of Consul: CONSUL_HTTP_ADDR if set, else a baton-devserver
    started from target/ (stopped on exit)."""
    if os.environ.get("CONSUL_HTTP_ADDR"):
        yield os.environ["CONSUL_HTTP_ADDR"]
        return
    binary = next((ROOT / "target" / p / "baton-devserver" for p in ("debug", "release")
                   if (ROOT / "target" / p / "baton-devserver").exists()), None)
    if binary is None:
        raise SystemExit("CONSUL_HTTP_ADDR is unset and baton-devserver is not built "
                         "(cargo build -p consul-baton-devserver)")
    # BATON_TEST_DEVSERVER_PRETTY: answer in `consul agent -dev`'s layout (indented JSON).
    pretty = os.environ.get("BATON_TEST_DEVSERVER_PRETTY", "") not in ("", "0")
    proc = subprocess.Popen([str(binary), "--port", "0", "--session-ttl-min", "1s"]
                            + (["--pretty"] if pretty else []),
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        line = proc.stdout.readline().strip()
        if not line.startswith("BATON_DEVSERVER_ADDR="):
            raise SystemExit(f"the dev server did not start: {line!r}")
        addr = line.split("=", 1)[1]
        print(f"CONSUL_HTTP_ADDR is unset: started a dev server at {addr}")
        yield addr
    finally:
        proc.terminate()
        proc.wait(timeout=10)
