"""MkDocs hooks (mkdocs.yml): the site's pages that live outside docs/.

README.md is the home page, CHANGELOG.md, LICENSE, the core's statuses
(tests/vectors/status.txt) and the benchmark report (bench/results/) are
pages or files of their own, each kept in one place, where the
repository has it. Every page's links are written between repository paths,
as GitHub reads them (README.md links `docs/python.md`, docs/performance.md
links `../bench/results/results.md`); before MkDocs reads a page, such a link
is rewritten into the link between the two pages of the site. A link to a
repository file that the site does not carry is left as it is, so the strict
build reports it.
"""

from __future__ import annotations

import posixpath
import re
import sys
from pathlib import Path

from mkdocs.structure.files import File

sys.path.insert(0, str(Path(__file__).parent))
from fences import segments  # noqa: E402  (tools/docs/fences.py, beside this file)

# repository path -> path in the site
OUTSIDE = {
    "README.md": "index.md",
    "CHANGELOG.md": "changelog.md",
    "LICENSE": "LICENSE",
    "tests/vectors/status.txt": "status.txt",
    "bench/results/results.md": "bench/results.md",
    "bench/results/redis.md": "bench/redis.md",
    "bench/results/chart.png": "bench/chart.png",
}
REPO_PATH = {site: repo for repo, site in OUTSIDE.items()}
LINK = re.compile(r"(\]\()([^)\s]+)(\))")


def on_files(files, config):
    root = Path(config["config_file_path"]).parent
    for repo, site in OUTSIDE.items():
        files.append(File.generated(config, site, abs_src_path=str(root / repo)))
    return files


def site_path(target: str, page_repo_path: str) -> str | None:
    """The site path of a relative link `target` written in the repository
    file `page_repo_path`, or None when the site does not carry it."""
    resolved = posixpath.normpath(posixpath.join(posixpath.dirname(page_repo_path), target))
    if resolved in OUTSIDE:
        return OUTSIDE[resolved]
    if resolved.startswith("docs/"):
        return resolved[len("docs/"):]
    return None


def on_page_markdown(markdown, page, config, files):
    src = page.file.src_uri
    repo_path = REPO_PATH.get(src, "docs/" + src)

    def rewrite(match):
        url = match.group(2)
        if re.match(r"^[a-z][a-z0-9+.-]*:|^[#/]", url):
            return match.group(0)  # a scheme, an anchor of this page, an absolute path
        path, sep, fragment = url.partition("#")
        target = site_path(path, repo_path)
        if target is None:
            return match.group(0)
        relative = posixpath.relpath(target, posixpath.dirname(src) or ".")
        return match.group(1) + relative + sep + fragment + match.group(3)

    # Outside fenced code only.
    return "".join(chunk if fenced else LINK.sub(rewrite, chunk)
                   for fenced, chunk in segments(markdown))
