"""Outgoing e-mail through the SMTP server of ``[smtp]``, with the standard library.

``smtplib`` blocks, so each message is sent in a worker thread (``asyncio.to_thread``): the event
loop never waits on the mail server. Every socket operation has ``[smtp] timeout_seconds``.
With ``starttls`` the connection is upgraded before anything else, the server's certificate
verified against the system's CAs and ``[network] ca_bundle``; a server that cannot upgrade is a
failure, never a reason to go on in clear.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import smtplib
import socket
import ssl
from email.message import EmailMessage

from core.config import SmtpConfig


class MailError(Exception):
    """The message was not accepted; ``str()`` says why in words fit for an API answer."""


def configured(config: SmtpConfig) -> bool:
    return bool(config.host)


def new_message(
    config: SmtpConfig, *, to: str, subject: str, body: str, date: dt.datetime, reply_to: str | None = None
) -> EmailMessage:
    """A plain-text message from ``[smtp] from_address``."""
    message = EmailMessage()
    message["From"] = config.from_address
    message["To"] = to
    if reply_to:
        message["Reply-To"] = reply_to
    message["Subject"] = subject
    message["Date"] = email.utils.format_datetime(date)
    message["Message-ID"] = email.utils.make_msgid(domain=config.from_address.rpartition("@")[2] or None)
    message.set_content(body)
    return message


def _tls_context(ca_bundle: str) -> ssl.SSLContext:
    context = ssl.create_default_context()
    if ca_bundle:
        context.load_verify_locations(cafile=ca_bundle)
    return context


def _text(reply: bytes | str) -> str:
    """An SMTP reply as words; smtplib keeps the server's bytes, or a str it made itself."""
    return reply.decode(errors="replace") if isinstance(reply, bytes) else reply


def _describe(exc: BaseException) -> str:
    if isinstance(exc, smtplib.SMTPRecipientsRefused):
        code, reply = next(iter(exc.recipients.values()))
        return f"it refused the recipient ({code} {reply.decode(errors='replace')})"
    if isinstance(exc, smtplib.SMTPAuthenticationError):
        return f"it refused the login of [smtp] username ({exc.smtp_code} {_text(exc.smtp_error)})"
    if isinstance(exc, smtplib.SMTPNotSupportedError):
        return f"it does not support a step that [smtp] asks for ({exc})"
    if isinstance(exc, smtplib.SMTPResponseException):
        return f"it answered {exc.smtp_code} {_text(exc.smtp_error)}"
    if isinstance(exc, smtplib.SMTPServerDisconnected):
        return "it closed the connection"
    if isinstance(exc, TimeoutError):
        return "it did not answer in time"
    if isinstance(exc, ssl.SSLCertVerificationError):
        return f"its TLS certificate could not be verified ({exc.verify_message})"
    if isinstance(exc, ssl.SSLError):
        return f"TLS failed ({exc.reason or exc})"
    if isinstance(exc, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(exc, socket.gaierror):
        return "its name does not resolve"
    if isinstance(exc, OSError):
        return f"the connection failed ({exc.strerror or exc})"
    return str(exc)


def _send_blocking(config: SmtpConfig, message: EmailMessage, ca_bundle: str) -> None:
    try:
        with smtplib.SMTP(config.host, config.port, timeout=config.timeout_seconds) as smtp:
            if config.starttls:
                smtp.starttls(context=_tls_context(ca_bundle))
            if config.username:
                smtp.login(config.username, config.password)
            smtp.send_message(message)
    except (smtplib.SMTPException, OSError) as exc:
        raise MailError(f"The mail server {config.host}:{config.port} did not take the message: {_describe(exc)}.") from None


async def send(config: SmtpConfig, message: EmailMessage, *, ca_bundle: str = "") -> None:
    """Hand the message to the SMTP server, or raise ``MailError``."""
    await asyncio.to_thread(_send_blocking, config, message, ca_bundle)
