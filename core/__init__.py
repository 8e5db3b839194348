"""Business rules and the adapters to the outside world; no HTTP and no SQL here."""
