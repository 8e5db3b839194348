"""One-click DNS set-up through Domain Connect (docs/one-click.md): the service-provider side."""
