"""``python -m dynfuse`` (or ``dynfuse``): one subcommand per job, each a ``_<command>`` function."""

from __future__ import annotations

import argparse
import sys

from . import config, disk_cache, registry, runner


def main(argv: list[str] | None = None) -> int:
    """Run the command line; returns the exit status so tests and the console script share it."""
    parser = argparse.ArgumentParser(prog="dynfuse", description="dynfuse command line tools")
    commands = parser.add_subparsers(dest="command", required=True)

    cache = commands.add_parser("cache", help="the on-disk cache of compiled kernels")
    cache_actions = cache.add_subparsers(dest="action", required=True)
    cache_actions.add_parser("info", help="where the cache is, whether it can be written, and its size")
    cache_actions.add_parser("clear", help="remove the cached kernels (and nothing else)")
    cache.set_defaults(run=_cache)

    run = commands.add_parser(
        "run",
        usage="%(prog)s [options] SCRIPT [ARGS ...]",
        help="run an unmodified NumPy script on dynfuse and report what it did",
        description="Run SCRIPT as `python SCRIPT ARGS` would, with the script's own `import numpy` "
        "resolved to dynfuse.numpy (libraries keep real NumPy); print a report to stderr at exit.",
    )
    run.add_argument(
        "--backend",
        type=_available_backend,
        metavar="{" + ",".join(registry.BACKENDS) + "}",
        help=f"the backend that runs the arrays (default: DYNFUSE_BACKEND, else {registry.DEFAULT_BACKEND})",
    )
    run.add_argument(
        "--report", choices=runner.REPORT_FORMATS, default="text", help="the report printed to stderr at exit"
    )
    run.add_argument("--report-file", metavar="PATH", help="also write the report to PATH, as JSON")
    run.add_argument(
        "--profile",
        action="store_true",
        help="attribute what dynfuse did to the script's lines: a table by time to stderr at exit, and "
        "the lines, fallbacks, recompiles and kernels in --report-file's JSON",
    )
    run.add_argument(
        "--profile-html",
        metavar="PATH",
        help="profile (as --profile) and write the profile to PATH as a web page",
    )
    # One REMAINDER, not a SCRIPT positional before it: argparse would drop a `--` meant for the script.
    run.add_argument(
        "command_line",
        nargs=argparse.REMAINDER,
        metavar="SCRIPT [ARGS ...]",
        help="the script and its arguments (its sys.argv)",
    )
    run.set_defaults(run=_run, usage_error=run.error)

    fuzz = commands.add_parser(
        "fuzz",
        help="check random array programs against NumPy",
        description="Run random array programs through dynfuse and through NumPy and compare them; "
        "print each failure, shrunk, as a snippet to paste into a test. Exit status 1 on any failure.",
    )
    fuzz.add_argument("--examples", type=int, default=500, help="how many programs (default 500)")
    fuzz.add_argument("--seed", type=int, help="repeat a session (default: a fresh seed, printed)")
    fuzz.add_argument(
        "--backend",
        type=_available_backend,
        metavar="{" + ",".join(registry.BACKENDS) + "}",
        help=f"the backend to check (default: DYNFUSE_BACKEND, else {registry.DEFAULT_BACKEND})",
    )
    fuzz.add_argument("--max-depth", type=int, default=8, help="steps per program, at most (default 8)")
    fuzz.add_argument("--time", type=float, metavar="SECONDS", help="stop after this long")
    fuzz.add_argument(
        "--faults",
        type=_fault_rate,
        default=0.0,
        metavar="RATE",
        help="make planning, compiles and launches fail at this rate (0 to 1): every program must "
        "still give NumPy's result (default 0)",
    )
    fuzz.set_defaults(run=_fuzz)

    arguments = parser.parse_args(argv)
    return arguments.run(arguments)


def _cache(arguments: argparse.Namespace) -> int:
    if arguments.action == "clear":
        removed = disk_cache.clear()
        print(f"removed {_entries(removed)} from {config.cache_dir}")
        return 0
    info = disk_cache.info()
    print(f"directory: {info['directory']}")
    print(f"writable:  {'yes' if info['writable'] else 'no'}")
    print(f"enabled:   {'yes' if info['enabled'] else 'no (DYNFUSE_DISK_CACHE=0)'}")
    if info["owner"] is None:
        print("owner:     none yet (made private on first use)")
    else:
        print(f"owner:     {info['owner']}, mode {info['mode']}")
    print(f"trusted:   {'yes' if info['trusted'] else 'no: ' + info['reason']}")
    shared = (
        f"yes, entries authenticated by the key in {config.cache_key}" if info["shared"] else "no (private)"
    )
    print(f"shared:    {shared}")
    print(f"entries:   {_entries(info['entries'])} ({_human_size(info['bytes'])})")
    for namespace, totals in info["namespaces"].items():
        print(f"  {namespace}: {_entries(totals['entries'])} ({_human_size(totals['bytes'])})")
    return 0


def _available_backend(name: str) -> str:
    reason = registry.unavailable_reason(name)
    if reason is not None:
        raise argparse.ArgumentTypeError(reason)
    return name


def _run(arguments: argparse.Namespace) -> int:
    command_line = arguments.command_line
    if command_line[:1] == ["--"]:  # the end of the runner's options (argparse versions differ)
        command_line = command_line[1:]
    if not command_line:
        arguments.usage_error("the following arguments are required: SCRIPT")
    if arguments.backend is not None:
        registry.set_backend(arguments.backend)
    return runner.run(
        command_line[0],
        command_line[1:],
        arguments.report,
        arguments.report_file,
        profile=arguments.profile or arguments.profile_html is not None,
        profile_html=arguments.profile_html,
    )


def _fuzz(arguments: argparse.Namespace) -> int:
    from .testing import fuzz

    return fuzz.main(
        arguments.examples,
        arguments.seed,
        arguments.backend,
        arguments.max_depth,
        arguments.time,
        arguments.faults,
    )


def _fault_rate(text: str) -> float:
    rate = float(text)
    if not 0 <= rate <= 1:
        raise argparse.ArgumentTypeError(f"a rate lies in [0, 1], not {text}")
    return rate


def _entries(count: int) -> str:
    return f"{count} {'entry' if count == 1 else 'entries'}"


def _human_size(size: float) -> str:
    units = ("B", "KiB", "MiB", "GiB", "TiB")
    power = 0
    while size >= 1024 and power < len(units) - 1:
        size /= 1024
        power += 1
    return f"{size:.0f} B" if power == 0 else f"{size:.1f} {units[power]}"


if __name__ == "__main__":
    sys.exit(main())
