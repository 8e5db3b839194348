"""Watching domains and certificates in the background (docs/concepts.md, "Lifecycle")."""
