"""The `kiln` command of the Python package: runs the CLI binary the wheel carries (kiln/bin/kiln).

The console-script entry point and `python -m kiln` land here; the process becomes the CLI
(exec), so exit codes, signals and `kiln serve` behave as with the binary itself.
"""

from __future__ import annotations

import os
import sys
from typing import List, Optional

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


def executable() -> str:
    """The path of the kiln CLI inside the installed package."""
    return os.path.join(_PACKAGE_DIR, "bin", "kiln")


def main(argv: Optional[List[str]] = None) -> None:
    exe = executable()
    if not os.access(exe, os.X_OK):
        sys.exit(f"kiln: the CLI is missing from this installation ({exe}); reinstall the package")
    # `kiln compile -o` links model libraries against the runtime archive the package carries.
    archive = os.path.join(_PACKAGE_DIR, "lib", "libkiln_runtime.a")
    if "KILN_RUNTIME_LIB" not in os.environ and os.path.exists(archive):
        os.environ["KILN_RUNTIME_LIB"] = archive
    args = sys.argv[1:] if argv is None else argv
    os.execv(exe, [exe, *args])
