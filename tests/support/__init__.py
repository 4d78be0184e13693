"""What the tiers share: the engine-shaped servers, hand-built rows, sshd and systemd
harnesses (fixtures/: the fixtures tests/conftest.py registers)."""
