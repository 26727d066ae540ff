"""`python -m itsmreview.cli`: the same command line as `itsmreview`."""

from itsmreview.cli import main

main()
