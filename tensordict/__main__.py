"""``python -m tensordict``: runs the command line of tensordict/_cli.py."""

import os
import sys

from tensordict._cli import main

if __name__ == "__main__":
    if hasattr(sys.stdout, "reconfigure"):  # keys a terminal cannot show come out escaped
        sys.stdout.reconfigure(errors="backslashreplace")
    try:
        status = main()
        sys.stdout.flush()
    except BrokenPipeError:  # the reader went away (``... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        status = 2
    sys.exit(status)
