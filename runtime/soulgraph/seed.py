"""`python -m soulgraph.seed [--hermes-home DIR] [--json]`: what seeding a soul graph from a
Hermes home would build. The seeder itself is `soulgraph.hermes.seed`."""

import sys

from soulgraph.hermes.seed import main

if __name__ == "__main__":
    sys.exit(main())
