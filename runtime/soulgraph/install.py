"""`python -m soulgraph.install [--hermes-home DIR] [--check]`: the soul graph into a Hermes home.

The command the fleet's hermes role runs; the installer itself is `soulgraph.hermes.install`."""

import sys

from soulgraph.hermes.install import main

if __name__ == "__main__":
    sys.exit(main())
