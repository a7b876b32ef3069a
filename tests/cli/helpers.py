"""One way to run the command line in-process for a test."""

from __future__ import annotations

from app.cli import main


def run(capsys, *argv):
    """main(argv) with every argument as text; returns (exit code, stdout, stderr)."""
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err
