from itsmreview.cli import main

main()
