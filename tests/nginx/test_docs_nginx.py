"""The nginx the documentation shows runs as written: the README's and the nginx
page's configs pass `nginx -t` (as root, whose configs they are), the nginx
page's config for a user other than root starts, decides and reloads as that
user with the commands the page gives, and the check-then-reload command of
the README, the nginx page and the live-limits page works in a shell as shown,
on the one limits file they all name (/etc/nginx/cellrate-limits.lua).

The pages' paths are mapped into a directory of the test's own, and nothing
else changes: /opt/cellrate/ (the tree) to this tree, /etc/nginx/ and
~/nginx-try to the directory, the region to one of the test's own, port 8080
to a free port. The commands run without LUA_PATH and LUA_CPATH in their
environment, so a command that forgets them fails here as it would for a user.
"""

import json
import os
import pathlib
import pwd
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

from server import REPO, free_port, nginx_binary

sys.path.insert(0, str(REPO / "tools" / "docs"))
import fences  # noqa: E402  (tools/docs/fences.py: the blocks of a Markdown page)

PAGES = ("README.md", "docs/nginx.md", "docs/live.md", "docs/operations.md")
LIMITS_FILE = "/etc/nginx/cellrate-limits.lua"
REGION = "/dev/shm/nginx-per-ip"


def blocks(page, lang):
    return [block.code for block in fences.blocks((REPO / page).read_text(encoding="utf-8"))
            if block.lang == lang]


def limits_file(page):
    """The page's limits file: its Lua block headed with the file's name."""
    found = [code for code in blocks(page, "lua") if code.startswith(f"-- {LIMITS_FILE}\n")]
    assert len(found) == 1, f"{page}: one Lua block headed '-- {LIMITS_FILE}', not {len(found)}"
    return found[0]


def complete_configs(page):
    return [code for code in blocks(page, "nginx") if re.search(r"^events\b", code, re.M)]


def user_config():
    """The nginx page's config for a user other than root."""
    found = [code for code in complete_configs("docs/nginx.md") if "ngx.config.prefix()" in code]
    assert len(found) == 1, found
    return found[0]


def user_session():
    found = [code for code in blocks("docs/nginx.md", "sh") if "nginx -p ~/nginx-try" in code]
    assert len(found) == 1, found
    return found[0]


def change_commands(page):
    """The page's shell blocks that check the limits file and reload."""
    return [code for code in blocks(page, "sh") if f"luajit {LIMITS_FILE}" in code]


class Place:
    """A directory standing for /etc/nginx and ~/nginx-try, a region, a port."""

    def __init__(self):
        self.directory = pathlib.Path(tempfile.mkdtemp(prefix="cellrate-docs-nginx-"))
        self.region = f"/dev/shm/cellrate-docs-nginx-{uuid.uuid4().hex}"
        self.port = free_port()

    def here(self, text):
        mapped = (text.replace("/opt/cellrate/", f"{REPO}/")
                  .replace("/etc/nginx/", f"{self.directory}/")
                  .replace("~/nginx-try", str(self.directory))
                  .replace(REGION, self.region)
                  .replace("listen 8080;", f"listen 127.0.0.1:{self.port};")
                  .replace("http://127.0.0.1:8080/", f"http://127.0.0.1:{self.port}/"))
        for outside in ("/opt/cellrate", "/etc/nginx", "~/", REGION):
            assert outside not in mapped, f"{outside} left in:\n{mapped}"
        return mapped

    def write(self, name, text):
        (self.directory / name).write_text(self.here(text))

    def inspect(self):
        info = subprocess.run([sys.executable, "-m", "cellrate", "inspect", self.region, "--json"],
                              capture_output=True, text=True, timeout=60)
        assert info.returncode == 0, info.stderr
        return json.loads(info.stdout)

    def master(self):
        path = self.directory / "nginx.pid"
        return int(path.read_text()) if path.exists() else None

    def stop(self):
        master = self.master()
        if master is not None:
            try:
                os.kill(master, signal.SIGTERM)
                deadline = time.monotonic() + 10
                while time.monotonic() < deadline and os.path.exists(f"/proc/{master}"):
                    time.sleep(0.02)
                os.killpg(master, signal.SIGKILL)  # the daemon leads its own group
            except ProcessLookupError:
                pass
        pathlib.Path(self.region).unlink(missing_ok=True)
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture
def place():
    place = Place()
    try:
        yield place
    finally:
        place.stop()


def unprivileged(place):
    """The command prefix that runs as a user other than root (nobody, when the
    test runs as root), the directory handed to that user."""
    if os.geteuid() != 0:
        return []
    nobody = pwd.getpwnam("nobody")
    for path in [place.directory, *place.directory.iterdir()]:
        os.chown(path, nobody.pw_uid, nobody.pw_gid)
    return ["setpriv", f"--reuid={nobody.pw_uid}", f"--regid={nobody.pw_gid}", "--clear-groups"]


def shell(place, prefix, script, **env):
    environment = {key: value for key, value in os.environ.items()
                   if not key.startswith(("LUA_PATH", "LUA_CPATH"))}
    environment.update(PATH=f"{os.environ['PATH']}:/usr/sbin",
                       HOME=str(place.directory), **env)
    return subprocess.run([*prefix, "sh", "-ec", script], cwd=place.directory, env=environment,
                          capture_output=True, text=True, timeout=120)


def workers(master):
    found = set()
    for entry in pathlib.Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                found.add(int(entry.name))
    return found


def test_every_page_names_the_one_limits_file():
    allowed = {LIMITS_FILE, "~/nginx-try/cellrate-limits.lua", "cellrate-limits.lua"}
    for page in PAGES:
        names = set(re.findall(r"[\w./~-]*limits\.lua\b", (REPO / page).read_text()))
        assert names and names <= allowed, (page, names - allowed)
    for page in PAGES[:3]:
        limits_file(page)  # each shows it


@pytest.mark.parametrize("page", ["README.md", "docs/nginx.md"])
def test_the_complete_config_passes_nginx_t(place, page):
    if os.geteuid() != 0:
        pytest.skip("these configs are root's (docs/nginx.md: as a user other than root)")
    configs = [code for code in complete_configs(page) if code != user_config()]
    assert len(configs) == 1, configs
    place.write("cellrate-limits.lua", limits_file(page))
    place.write("nginx.conf", configs[0])
    tested = subprocess.run([nginx_binary(), "-t", "-q", "-p", str(place.directory),
                             "-c", str(place.directory / "nginx.conf")],
                            capture_output=True, text=True, timeout=60)
    assert tested.returncode == 0, tested.stderr


def test_the_config_for_a_user_other_than_root_runs_as_written(place):
    """docs/nginx.md's session: start, 30 requests, inspect, check and reload, stop."""
    place.write("cellrate-limits.lua", limits_file("docs/nginx.md"))
    place.write("nginx.conf", user_config())
    prefix = unprivileged(place)
    ran = shell(place, prefix, place.here(user_session()))
    assert ran.returncode == 0, ran.stderr + (place.directory / "error.log").read_text()
    lines = ran.stdout.splitlines()
    statuses = lines[0].split()
    assert len(statuses) == 30 and set(statuses) <= {"200", "429"}, lines[0]
    # at least the burst, and exactly what the region counted (whatever the pace)
    assert statuses.count("200") >= 20, statuses
    stats = place.inspect()["stats"]  # the page's `cellrate inspect`
    assert (stats["admitted"], stats["refused"]) == (statuses.count("200"),
                                                     statuses.count("429")), stats
    # `nginx -s stop` stopped it (the master removes its pid file as it exits)
    deadline = time.monotonic() + 10
    while place.master() is not None:
        assert time.monotonic() < deadline, "nginx -s stop left nginx running"
        time.sleep(0.02)


@pytest.mark.parametrize("page", PAGES[:3])
def test_the_limit_change_command_runs_as_written(place, page):
    """The page's check-then-reload, in a shell as shown, with `nginx` standing
    for the test's nginx (the user's config, in the test's directory)."""
    commands = change_commands(page)
    assert len(commands) == 1, f"{page}: one check-then-reload block, not {len(commands)}"
    command = commands[0]
    place.write("cellrate-limits.lua", limits_file(page))
    place.write("nginx.conf", user_config())
    prefix = unprivileged(place)
    started = shell(place, prefix, place.here("nginx -p ~/nginx-try -c nginx.conf"))
    assert started.returncode == 0, started.stderr
    deadline = time.monotonic() + 10
    while place.master() is None or not workers(place.master()):
        assert time.monotonic() < deadline, (place.directory / "error.log").read_text()
        time.sleep(0.02)
    before = workers(place.master())
    assert place.inspect()["rate"] == 10.0
    ours = 'nginx() { command nginx -p "$NGINX_PREFIX" -c nginx.conf "$@"; }\n'
    ran = shell(place, prefix, ours + place.here(command), NGINX_PREFIX=str(place.directory))
    assert ran.returncode == 0, ran.stderr
    changed = 's|"10/s"|"20/s"|' in command
    assert place.inspect()["rate"] == (20.0 if changed else 10.0)
    # the reload brought a new generation of workers
    deadline = time.monotonic() + 10
    while not workers(place.master()) - before:
        assert time.monotonic() < deadline, (place.directory / "error.log").read_text()
        time.sleep(0.02)
    assert "init_by_lua error" not in (place.directory / "error.log").read_text()
