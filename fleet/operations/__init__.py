"""Task kinds, one small module each. Importing this package registers them all."""

from fleet.operations import (command, directory, files, hermes_install, link, module, prune,  # noqa: F401
                              service, soul_import, venv)
from fleet.operations.base import (CHANGED, FAILED, OK, SKIPPED, REGISTRY, Context, Outcome,
                                   OperationError)

__all__ = ["CHANGED", "FAILED", "OK", "SKIPPED", "REGISTRY", "Context", "Outcome",
           "OperationError"]
