"""The layered soul repository (seed 003): validate it; export, import and bundle come next."""
