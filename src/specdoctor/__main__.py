"""`python -m specdoctor` runs the same CLI as the console script."""

from specdoctor.cli.main import main

if __name__ == "__main__":
    main()
