#!/usr/bin/env python3
"""Verifies the DKIM signatures of delivered messages with dkimpy, as a receiver would.

Usage: verify_dkim.py --dns 127.0.0.1:PORT FILE...

The public keys come from the DNS server at --dns (the end-to-end tests' server on loopback,
where the test published the records the API gave it), asked with dnspython. For each file
prints one JSON object per line and check: {"item", "check", "ok", "reason"}, for the checks
`dkimpy rsa-sha256`, `dkimpy ed25519-sha256` (each: exactly one such signature, and it
verifies), `d= is the From domain` (every signature's d= equals the From address's
domain) and `signed headers` (every signature's h= names each of Feedback-ID,
List-Unsubscribe and List-Unsubscribe-Post the message has, as many times as it has it, so
a receiver honours them). Exits 0 when it could run the checks (whatever their results), 2 on bad usage and
3 when a module is missing.
"""

import argparse
import email.parser
import email.policy
import email.utils
import json
import logging
import sys

try:
    import dkim
    import dkim.util
    import dns.exception
    import dns.message
    import dns.query
    import dns.rcode
    import dns.rdatatype
    import nacl.signing  # dkimpy verifies ed25519-sha256 with PyNaCl, and says "unknown algorithm" without it
except ImportError as missing:
    print(f"verify_dkim.py: missing Python module {missing.name}: pip install dkimpy dnspython pynacl", file=sys.stderr)
    sys.exit(3)

ALGORITHMS = ("rsa-sha256", "ed25519-sha256")
# Header fields a receiver acts on only when a signature covers them.
MUST_SIGN = (b"feedback-id", b"list-unsubscribe", b"list-unsubscribe-post")


def txt_lookup(host, port):
    """A dkimpy dnsfunc asking only host:port (UDP, then TCP when truncated)."""

    def lookup(name, timeout=5):
        if isinstance(name, bytes):
            name = name.decode("ascii")
        query = dns.message.make_query(name, dns.rdatatype.TXT)
        try:
            response, _ = dns.query.udp_with_fallback(query, host, port=port, timeout=timeout)
        except dns.exception.DNSException as error:
            raise dkim.DnsTimeoutError(f"{name} at {host}:{port}: {error!r}") from error
        if response.rcode() != dns.rcode.NOERROR:
            return None
        for rrset in response.answer:
            if rrset.rdtype == dns.rdatatype.TXT:
                return b"".join(next(iter(rrset)).strings)
        return None

    return lookup


class Collect(logging.Handler):
    """Keeps what dkimpy logs about a verification: its reasons for a failure."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def signatures(raw):
    """(index, tags, the field's raw value) of every DKIM-Signature, in order."""
    found = []
    for name, value in dkim.DKIM(raw).headers:
        if name.lower() == b"dkim-signature":
            try:
                found.append((dkim.util.parse_tag_value(value), value))
            except Exception as error:  # a signature that does not parse is reported as such
                found.append(({b"error": str(error).encode()}, value))
    return [(i, tags, value) for i, (tags, value) in enumerate(found)]


def verify_one(raw, index, dnsfunc):
    """(ok, reason) of signature `index` by dkimpy."""
    log = Collect()
    logger = logging.getLogger(f"dkimpy-{index}")
    logger.handlers = [log]
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    try:
        ok = dkim.DKIM(raw, logger=logger).verify(idx=index, dnsfunc=dnsfunc)
    except dkim.DKIMException as error:
        return False, f"{type(error).__name__}: {error}"
    if ok:
        return True, "pass"
    details = [line for line in log.lines if not line.startswith(("sig:", "bh:"))]
    if any(line.endswith("valid: False") for line in details):
        return False, "the body hash matches; the signature over the header fields does not verify"
    return False, "does not verify: " + ("; ".join(details) or "dkimpy gave no reason")


def from_domain(raw):
    """The domain of the From address, lower case, or None."""
    message = email.parser.BytesHeaderParser(policy=email.policy.compat32).parsebytes(raw)
    _, address = email.utils.parseaddr(message.get("From", ""))
    return address.rpartition("@")[2].lower() or None


def check(path, dnsfunc):
    with open(path, "rb") as f:
        raw = f.read()
    results = []
    sigs = signatures(raw)
    for algorithm in ALGORITHMS:
        matching = [(i, value) for i, tags, value in sigs if tags.get(b"a", b"").decode() == algorithm]
        if len(matching) != 1:
            present = [tags.get(b"a", b"?").decode() for _, tags, _ in sigs]
            results.append((f"dkimpy {algorithm}", False, f"{len(matching)} {algorithm} signatures (a= of all: {present})"))
            continue
        index, value = matching[0]
        ok, reason = verify_one(raw, index, dnsfunc)
        if not ok:
            # The bytes a reader of the failure needs to see: how the field ends.
            reason += f"; the field ends {value[-24:]!r}"
        results.append((f"dkimpy {algorithm}", ok, reason))
    domain = from_domain(raw)
    wrong = [tags.get(b"d", b"").decode() for _, tags, _ in sigs if tags.get(b"d", b"").decode().lower() != domain]
    if not sigs:
        results.append(("d= is the From domain", False, "no DKIM-Signature"))
    elif wrong:
        results.append(("d= is the From domain", False, f"From domain {domain}, d={wrong}"))
    else:
        results.append(("d= is the From domain", True, f"d={domain}"))
    present = [name.lower() for name, _ in dkim.DKIM(raw).headers if name.lower() in MUST_SIGN]
    unsigned = []
    for _, tags, _ in sigs:
        h = [name.strip().lower() for name in tags.get(b"h", b"").split(b":")]
        unsigned += [name.decode() for name in set(present) if h.count(name) < present.count(name)]
    if not sigs:
        results.append(("signed headers", False, "no DKIM-Signature"))
    elif unsigned:
        results.append(("signed headers", False, f"not in h=: {sorted(set(unsigned))}"))
    else:
        results.append(("signed headers", True, "h= covers " + (", ".join(sorted({n.decode() for n in present})) or "none of them (absent)")))
    return [{"item": path, "check": c, "ok": ok, "reason": reason} for c, ok, reason in results]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dns", required=True, help="HOST:PORT of the DNS server holding the keys")
    parser.add_argument("files", nargs="+")
    args = parser.parse_args()
    host, _, port = args.dns.rpartition(":")
    dnsfunc = txt_lookup(host, int(port))
    for path in args.files:
        for result in check(path, dnsfunc):
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
