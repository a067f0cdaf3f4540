"""The official Node.js driver doing basic CRUD (tests/compat/node/crud.mjs)."""

import shutil
import subprocess
from pathlib import Path

from conftest import NODE_DIR, client_env, require_client

SCRIPT = NODE_DIR / "crud.mjs"


def test_node_driver_crud(uri):
    require_client(
        NODE_DIR / "node_modules" / "mongodb" / "package.json",
        "the Node.js driver (npm package mongodb)",
        "not in tests/compat/node/node_modules (run `npm ci` there or `bash scripts/test.sh`)",
    )
    node = require_client(
        Path(shutil.which("node") or "/nonexistent/node"), "node", "node is not on PATH"
    )
    result = subprocess.run(
        [str(node), str(SCRIPT), uri],
        cwd=NODE_DIR,
        env=client_env(),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=300,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"crud.mjs exited {result.returncode}:\n{output[-4000:]}"
    assert "crud.mjs: all checks passed" in result.stdout, output[-4000:]
