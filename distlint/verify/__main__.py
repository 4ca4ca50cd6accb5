"""`python -m distlint.verify [OPTIONS] SCRIPT [SCRIPT_ARGS]...` (no static check; see `distlint verify`)."""

import sys

import click

from distlint.verify.cli import VERIFY_HELP, run_verify_command, verify_options


@click.command(
    help=VERIFY_HELP,
    context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False},
)
@click.argument("script", type=click.Path(exists=True, dir_okay=False))
@click.argument("script_args", nargs=-1, type=click.UNPROCESSED)
@click.option(
    "--format", "fmt", type=click.Choice(["text", "json"]), default="text", show_default=True
)
@verify_options
def main(script, script_args, fmt, **options):
    sys.exit(run_verify_command(script, script_args, fmt, None, **options))


if __name__ == "__main__":
    main()
