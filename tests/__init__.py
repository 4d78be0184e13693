"""specsweep's tests, by tier (tests/conftest.py says what each tier holds and runs)."""
