"""How the fleet reaches a host: one module per transport."""
