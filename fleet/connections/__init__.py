"""How the fleet reaches a host: one module per transport, one interface (base.Connection)."""

from .base import (AuthenticationFailed, CommandFailed, CommandTimeout, Connection,
                   HostConnectionError, HostKeyRejected, HostUnreachable, Result)
from .local import LocalConnection
from .ssh import SSHConnection

__all__ = [
    "AuthenticationFailed", "CommandFailed", "CommandTimeout", "Connection",
    "HostConnectionError", "HostKeyRejected", "HostUnreachable", "LocalConnection", "Result",
    "SSHConnection",
]
