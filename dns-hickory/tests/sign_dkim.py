#!/usr/bin/env python3
"""Signs a message with dkimpy, the independent DKIM signer of tests/message_auth.rs.

Usage: sign_dkim.py DOMAIN SELECTOR PKCS8_DER_HEX < message > signed-message

The message (CRLF line ends) comes on stdin; the signed message (the DKIM-Signature header
followed by the message, unchanged) goes to stdout.
"""

import base64
import sys

import dkim

domain, selector, key_hex = sys.argv[1:4]
der = bytes.fromhex(key_hex)
pem = b"-----BEGIN PRIVATE KEY-----\n" + base64.encodebytes(der) + b"-----END PRIVATE KEY-----\n"
message = sys.stdin.buffer.read()
signature = dkim.sign(
    message,
    selector.encode(),
    domain.encode(),
    pem,
    canonicalize=(b"relaxed", b"relaxed"),
    include_headers=[b"from", b"to", b"subject", b"date", b"message-id"],
)
sys.stdout.buffer.write(signature + message)
