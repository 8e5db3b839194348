"""The service as the ACME client (RFC 8555) of a certificate authority such as Let's Encrypt:
``[provider] kind = "acme"``, behind the edge provider interface (core/edge/).

- ``provider``: ``AcmeProvider``, the edge provider: the delegation target, issue, refresh and
  renewal, validating again, the CAs in order with fallback and CAA;
- ``orders``: one order taken from placed to issued, step by step;
- ``cas``: the configured CAs, our account at each, their calls in worker threads;
- ``client``: one CA's endpoint through the ``acme`` package (certbot's), with what it lacks
  (``replaces``, ARI windows);
- ``keys``: keys, certificate requests, certificates, ARI ids;
- ``renewal``: when an issued certificate is renewed: inside the CA's window (ARI), read again
  when its ``Retry-After`` says;
- ``problems``: a CA's refusal (its problem document) in words a customer can act on;
- ``failures``: the pacing of a hostname's orders after failed validations, within the CA's limits;
- ``upkeep``: certificates of deleted domains revoked, domains moved from another provider
  pointed at the delegation zone.

May import: core.edge, core.delegation_dns, core.dns, the base modules of core/ and store/.
"""
