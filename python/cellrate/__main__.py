"""python -m cellrate inspect PATH [--json] | reset PATH [KEY] (cellrate._cli)."""

from cellrate._cli import run

run()
