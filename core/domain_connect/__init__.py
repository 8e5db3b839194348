"""One-click DNS set-up through Domain Connect (README, "One-click DNS set-up"): the service-provider side."""
