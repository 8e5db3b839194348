"""Issued ACME certificates handed to the TLS terminator that serves customers' hostnames (docs/acme.md,
"Certificates to the TLS terminator"): Caddy asks for them at handshake time, nginx and HAProxy
read files.

- ``index``: the certificate served for each hostname (of the workspace proving ownership now) with
  its key decrypted, in memory, so a handshake costs a dict lookup; reloaded when the stored
  certificates change, or a domain's deletion or verification touches them, in any process.
- ``secret``: the endpoints' own secret, compared in constant time.
- ``files``: the folder of PEM files for nginx and HAProxy, kept equal to the index, and the
  reload command run after a change; ``haproxy``: HAProxy's runtime API, which replaces a loaded
  certificate in place.

The endpoints themselves are HTTP, in handlers/tls_terminator.py, on a listener of their own.

May import: store/ and the base modules of core/ (crypto, clock, config, hostnames). No capability package:
what is served is what core/acme/ stored, read through the store.
"""
