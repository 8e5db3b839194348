"""Steps several browser tests take on the way to what they check."""

from __future__ import annotations


def signed_up_and_in(page, service: str, email: str, apex: str) -> None:
    """Sign up with one domain, then sign in at the development identity provider: its DNS page."""
    page.goto(service + "/")
    page.fill("input[name=email]", email)
    page.fill("input[name=domain]", apex)
    page.click("button:has-text('Sign up')")
    page.click("a.button:has-text('Sign in')")
    page.click("button:has-text('Sign in')")
    page.wait_for_url("**/site/*/dns")
