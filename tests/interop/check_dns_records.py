#!/usr/bin/env python3
"""Checks the SPF and DMARC values the API tells users to publish, with checkdmarc.

Usage: check_dns_records.py --dns 127.0.0.1:PORT --domain DOMAIN --spf VALUE --dmarc VALUE

Nothing is asked of the internet: checkdmarc's resolver asks only the DNS server at --dns
(the end-to-end tests' server on loopback, where the test published the records). Prints one
JSON object per line and check, {"item", "check", "ok", "reason"}:
- `checkdmarc SPF value` / `checkdmarc DMARC value`: the value as the API gave it parses
  (`parse_spf_record`, `parse_dmarc_record`), warnings in the reason;
- `checkdmarc SPF published` / `checkdmarc DMARC published`: checkdmarc finds and parses the
  record where the API said to publish it (`get_spf_record`, `get_dmarc_record`), and it is
  the API's value.
Exits 0 when it could run the checks (whatever their results), 2 on bad usage and 3 when a
module is missing.
"""

import argparse
import json
import sys

try:
    import checkdmarc.dmarc
    import checkdmarc.spf
    import dns.resolver
except ImportError as missing:
    print(f"check_dns_records.py: missing Python module {missing.name}: pip install checkdmarc dnspython", file=sys.stderr)
    sys.exit(3)


def resolver_at(host, port):
    """A dnspython resolver asking only host:port."""
    resolver = dns.resolver.Resolver(configure=False)
    resolver.nameservers = [host]
    resolver.port = port
    resolver.timeout = resolver.lifetime = 5
    return resolver


def outcome(check, run):
    try:
        ok, reason = run()
    except Exception as error:  # checkdmarc's errors are its verdict
        ok, reason = False, f"{type(error).__name__}: {error}"
    return {"check": check, "ok": ok, "reason": reason}


def warned(result, what):
    warnings = result.get("warnings") or []
    return "; ".join(warnings) if warnings else what


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dns", required=True, help="HOST:PORT of the DNS server")
    parser.add_argument("--domain", required=True)
    parser.add_argument("--spf", required=True, help="the SPF value the API gave")
    parser.add_argument("--dmarc", required=True, help="the DMARC value the API gave")
    args = parser.parse_args()
    host, _, port = args.dns.rpartition(":")
    resolver = resolver_at(host, int(port))
    domain = args.domain

    def spf_value():
        result = checkdmarc.spf.parse_spf_record(args.spf, domain, resolver=resolver, timeout=5)
        return True, warned(result, f"parses: all={result['parsed']['all']}")

    def dmarc_value():
        result = checkdmarc.dmarc.parse_dmarc_record(args.dmarc, domain, resolver=resolver, timeout=5)
        return True, warned(result, f"parses: p={result['tags']['p']['value']}")

    def spf_published():
        result = checkdmarc.spf.get_spf_record(domain, resolver=resolver, timeout=5)
        return result["record"] == args.spf, f"found {result['record']!r}"

    def dmarc_published():
        result = checkdmarc.dmarc.get_dmarc_record(domain, resolver=resolver, timeout=5)
        return result["record"] == args.dmarc, f"found {result['record']!r} at {result['location']}"

    for check, run in [
        ("checkdmarc SPF value", spf_value),
        ("checkdmarc DMARC value", dmarc_value),
        ("checkdmarc SPF published", spf_published),
        ("checkdmarc DMARC published", dmarc_published),
    ]:
        print(json.dumps({"item": domain, **outcome(check, run)}), flush=True)


if __name__ == "__main__":
    main()
