"""`python -m soulgraph.mcp [--soul-file PATH]`: serve a soul graph over MCP (stdio).

The command Hermes' config.yaml entry runs; the server itself is `soulgraph.server`."""

import sys

from soulgraph.server.app import main

if __name__ == "__main__":
    sys.exit(main())
