"""``python -m infercast``: the command line, for checkouts run from source (``PYTHONPATH=src``)."""

from infercast.cli import main

if __name__ == "__main__":
    main()
