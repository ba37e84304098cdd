"""The command line ``python -m tensordict``: arguments, exit codes and one-line errors."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from tensordict._cli_diff import differences
from tensordict._cli_inspect import render
from tensordict._survey import TENSOR_KINDS, Leaf, Survey, checkpoint_problem, survey

OK, FOUND, TROUBLE = 0, 1, 2

_EPILOG = """\
exit status:
  inspect  0 printed; 1 the checkpoint is invalid; 2 no checkpoint at PATH
  verify   0 valid;   1 the checkpoint is invalid; 2 no checkpoint at PATH
  diff     0 identical; 1 they differ; 2 trouble (no checkpoint, an invalid one)
Nothing is ever unpickled; pickled entries are reported, not loaded.
"""


def _error(message: str) -> None:
    print(" ".join(message.splitlines()), file=sys.stderr)  # always one line


def _read(path: str, call: str, verify: bool) -> Survey | str:
    """The surveyed checkpoint, or the one-line reason it could not be read."""
    try:
        return survey(path, call, verify)
    except (ValueError, TypeError, RuntimeError, OSError) as err:  # FormatError is a ValueError
        text = str(err)
        return text if text.startswith(call) else f"{call}: {path!r}: {text}"
    except Exception as err:  # a bug of ours still gets one line, not a traceback
        return (
            f"{call}: {path!r}: internal error reading the checkpoint: {type(err).__name__}: {err}"
        )


def _inspect(args: argparse.Namespace) -> int:
    call = "tensordict inspect"
    problem = checkpoint_problem(args.path, call)
    if problem:
        _error(problem)
        return TROUBLE
    result = _read(args.path, call, verify=False)
    if isinstance(result, str):
        _error(result + " (python -m tensordict verify checks it in full)")
        return FOUND
    print(render(args.path, result, ascii_only=not _can_print("├└│")))
    for note in result.notes:
        print(f"note: {note}")
    return OK


def _can_print(text: str) -> bool:
    try:
        text.encode(getattr(sys.stdout, "encoding", None) or "utf-8")  # None: a StringIO
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def _verify(args: argparse.Namespace) -> int:
    call = "tensordict verify"
    problem = checkpoint_problem(args.path, call)
    if problem:
        _error(problem)
        return TROUBLE
    result = _read(args.path, call, verify=True)
    if isinstance(result, str):
        _error(result)
        return FOUND
    for note in result.notes:
        print(f"note: {note}")
    tensors = [n for n in result.root.walk() if isinstance(n, Leaf) and n.kind in TENSOR_KINDS]
    checked = sum("sha256" in n.record for n in tensors)
    print(
        f"{args.path}: valid checkpoint, format version {result.root.meta['version']}; "
        f"{len(tensors)} tensor files, {checked} checksums verified, "
        f"{len(tensors) - checked} without a checksum"
    )
    return OK


def _diff(args: argparse.Namespace) -> int:
    call = "tensordict diff"
    trees = []
    for path in (args.a, args.b):
        problem = checkpoint_problem(path, call)
        result = _read(path, call, verify=False) if problem is None else problem
        if isinstance(result, str):
            _error(result)
            return TROUBLE
        trees.append(result.root)
    found = False
    try:
        for line in differences(trees[0], trees[1]):
            print(line)
            found = True
    except (OSError, ValueError, RuntimeError) as err:  # e.g. a file vanished meanwhile
        _error(f"{call}: {err}")
        return TROUBLE
    return FOUND if found else OK


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m tensordict",
        description="Look into tensordict checkpoints (docs/format.md, docs/cli.md).",
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    inspect = commands.add_parser(
        "inspect", help="print the tree of keys, shapes, dtypes and sizes (maps no data)"
    )
    inspect.add_argument("path", metavar="PATH")
    inspect.set_defaults(run=_inspect)
    verify = commands.add_parser(
        "verify", help="validate the format, and the checksums that are present"
    )
    verify.add_argument("path", metavar="PATH")
    verify.set_defaults(run=_verify)
    diff = commands.add_parser(
        "diff", help="list the keys, shapes, dtypes and values two checkpoints differ in"
    )
    diff.add_argument("a", metavar="A")
    diff.add_argument("b", metavar="B")
    diff.set_defaults(run=_diff)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line on ``argv`` (default: ``sys.argv[1:]``); returns the exit status.

    >>> import tempfile, torch
    >>> from tensordict import TensorDict
    >>> folder = tempfile.mkdtemp() + "/ckpt"
    >>> _ = TensorDict({"a": torch.zeros(2)}, [2]).memmap(folder, checksum=True)
    >>> main(["verify", folder])  # doctest: +ELLIPSIS
    /.../ckpt: valid checkpoint, format version 2; 1 tensor files, 1 checksums verified, ...
    0
    """
    args = _parser().parse_args(argv)
    run: Callable[[argparse.Namespace], int] = args.run
    return run(args)
