"""Who is calling and what they may do: accounts and workspaces (``accounts``, ``workspaces``),
the team and invitations (``team``), sign-up (``signup``), sign-in with OIDC (``signin``,
``oidc``, the portal's sign-in in progress in ``portal_signin``), the built-in development
identity provider (``dev_idp``), API keys (``api_keys``), scopes and roles (``scopes``) and the
bearer -> principal check every request makes (``auth``).

May import: core.domains (sign-up creates the first domain), core.outbound (the identity
provider's HTTP client), the base modules of core/ and store/.
"""
