"""soulfleet: roll the soul graph runtime out to a fleet of agent hosts."""
