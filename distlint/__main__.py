"""The ``distlint`` command-line process: ``python -m distlint`` and the ``distlint`` script."""

from distlint import collector


def main() -> None:
    collector.pause_startup()  # resumed once the lint engine is loaded (distlint.collector)
    from distlint.cli import main as command

    try:
        command()
    finally:
        collector.exiting()


if __name__ == "__main__":
    main()
