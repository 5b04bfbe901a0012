"""The layered soul repository (seed 003): validate and export it; import and bundle come next."""
