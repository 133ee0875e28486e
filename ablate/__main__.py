import sys

from ablate.cli import main

if __name__ == "__main__":
    sys.exit(main())
