#!/usr/bin/env python3
"""Evaluates SPF for one envelope with pyspf, and its DMARC alignment with checkdmarc.

Usage: check_spf.py --dns 127.0.0.1:PORT --ip IP --mail-from ADDRESS --helo NAME --from-domain DOMAIN

What a receiver does with the envelope of a message Tidings sent, by implementations Tidings
does not share code with: pyspf (the SPF library of pypolicyd-spf and SpamAssassin's
Python peers) evaluates SPF for the sending IP and the MAIL FROM as RFC 7208 says, asking
only the DNS server at --dns (the end-to-end tests' server on loopback); checkdmarc's
`get_base_domain` (the public suffix list) gives the organisational domains that DMARC's
relaxed SPF alignment (RFC 7489 §3.1.2) compares. Prints one JSON object:
{"spf": "pass"|"fail"|..., "explanation", "mail_from_org", "from_org", "aligned"}.
Exits 0 when it could evaluate (whatever the result), 2 on bad usage, 3 when a module is
missing.
"""

import argparse
import json
import sys

try:
    import checkdmarc.utils
    import dns.resolver
    import spf
except ImportError as missing:
    print(f"check_spf.py: missing Python module {missing.name}: pip install pyspf dnspython checkdmarc", file=sys.stderr)
    sys.exit(3)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dns", required=True, help="HOST:PORT of the DNS server")
    parser.add_argument("--ip", required=True)
    parser.add_argument("--mail-from", required=True)
    parser.add_argument("--helo", required=True)
    parser.add_argument("--from-domain", required=True, help="the domain of the From header")
    args = parser.parse_args()
    host, _, port = args.dns.rpartition(":")
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = int(port)
    resolver.timeout = resolver.lifetime = 5
    # pyspf asks dnspython's default resolver.
    dns.resolver.default_resolver = resolver

    result, explanation = spf.check2(i=args.ip, s=args.mail_from, h=args.helo)
    mail_from_domain = args.mail_from.rpartition("@")[2].lower()
    mail_from_org = checkdmarc.utils.get_base_domain(mail_from_domain)
    from_org = checkdmarc.utils.get_base_domain(args.from_domain.lower())
    print(json.dumps({
        "spf": result,
        "explanation": explanation,
        "mail_from_org": mail_from_org,
        "from_org": from_org,
        "aligned": mail_from_org == from_org,
    }))


if __name__ == "__main__":
    main()
