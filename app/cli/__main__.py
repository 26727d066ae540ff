"""`python -m itsmreview.cli`: the same command line as `itsmreview`."""

from itsmreview.cli import main

if __name__ == "__main__":  # not when a spawned process imports it as its parent's main module
    main()
