"""Post-deploy verification of fleet hosts with pytest-testinfra, over strict-host-key SSH.

    from fleet.verify import VerifyTarget, run_verify
    rc = run_verify([VerifyTarget("web1", "10.0.0.5", 22, "deploy", "~/.ssh/id_ed25519",
                                  "~/.ssh/known_hosts")], hermes=True, sha="abc123")
"""

from .run import EXIT_ERROR, EXIT_FAILED, EXIT_OK, EXIT_UNREACHABLE, run_verify
from .target import HostLayout, VerifyTarget

__all__ = ["VerifyTarget", "HostLayout", "run_verify",
           "EXIT_OK", "EXIT_FAILED", "EXIT_ERROR", "EXIT_UNREACHABLE"]
