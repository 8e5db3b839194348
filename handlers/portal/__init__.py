"""The portal's pages (server-rendered, Jinja2, templates/): ``pages`` (the page handler, the
words, sign-in), ``forms`` (a form acts once, in the workspace it was shown for), ``base`` (the
portal's signed-in handler and its helpers), and one module per part of the portal: ``account``,
``domain``, ``connect`` (one-click set-up), ``team``, ``webhooks``; ``idp``, the built-in
development identity provider's sign-in page. Modules import downwards only: pages <- forms (for a
type only) ... ``base`` <- the parts."""
