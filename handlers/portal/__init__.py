"""The portal's pages (server-rendered, Jinja2, templates/): ``pages`` (the page handler, the
words), ``forms`` (a form acts once, in the workspace it was shown for), ``signin`` (sign-up,
sign-in, sign-out), ``base`` (the portal's signed-in handler, a domain's DNS page and a
verification link's page), and one module per part of the portal: ``domains`` (the list, whose
rows refresh themselves, and adding one or many), ``domain`` (one domain's actions), ``live`` (the
status a waiting domain's page refreshes), ``keys``, ``account``, ``connect`` (one-click set-up),
``team``, ``webhooks``; ``idp``, the built-in development identity provider's sign-in page. Modules
import downwards only: pages <- forms (for a type only) ... ``base`` <- the parts."""
