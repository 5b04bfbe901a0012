"""The layered soul repository (seed 003): validate, export and bundle it; import comes next."""
