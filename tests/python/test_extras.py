"""Every adapter's dependency is an optional extra: `import cellrate` (and the
adapters that need no package: web, asgi, wsgi, websocket) imports none of
them, and pyproject.toml names the extra of each adapter module that does."""

import json
import re
import subprocess
import sys

from conftest import REPO

# adapter module -> (its extra, the distribution it needs, the module that imports)
EXTRAS = {
    "cellrate.prometheus": ("prometheus", "prometheus_client", "prometheus_client"),
    "cellrate.otel": ("otel", "opentelemetry-api", "opentelemetry"),
    "cellrate.grpc": ("grpc", "grpcio", "grpc"),
    "cellrate.redis": ("redis", "redis", "redis"),
    "cellrate.httpx": ("httpx", "httpx", "httpx"),
    "cellrate.requests": ("requests", "requests", "requests"),
}
CLIENTS = ["websockets", "uvicorn", "starlette"]


def test_import_cellrate_imports_no_optional_package():
    code = ("import sys, json, cellrate, cellrate.web, cellrate.asgi, cellrate.wsgi, "
            "cellrate.websocket; print(json.dumps(sorted(sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout)}
    unwanted = {module for _, _, module in EXTRAS.values()} | set(CLIENTS)
    assert loaded & unwanted == set()


def test_each_adapter_names_its_extra():
    text = (REPO / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    for extra, distribution, _ in EXTRAS.values():
        line = re.search(rf"^{extra} = \[(.*)\]$", section, re.M)
        assert line and distribution in line.group(1), (extra, distribution)
