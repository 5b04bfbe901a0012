"""`python -m soulgraph.memories serve`: the memories CLI's library as a local web page.

- app.py: the Starlette app (its JSON endpoints call soulgraph.memories' reading, shown and
  changes, as the CLI does: one write path, one audit) and `serve()`, which binds loopback
  and prints the URL with its token;
- static/: the page itself, hand-written HTML, CSS and JavaScript (the graph is SVG drawn by
  static/app.js), served from that folder only.
"""

from soulgraph.memories.web.app import make_app, serve

__all__ = ["make_app", "serve"]
