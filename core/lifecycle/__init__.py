"""Watching domains and certificates in the background (README, "Lifecycle")."""
