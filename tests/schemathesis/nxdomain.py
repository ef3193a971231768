"""A DNS server on loopback that answers every query at once with NXDOMAIN.

The schemathesis run points the server's domain checks here: a generated domain that links
lead to is checked (`POST /v1/domains/{id}/verify`) and found to have no records, at once,
rather than after a resolver's timeout, which outlasts schemathesis' request timeout.

Usage: nxdomain.py PORT_FILE   (binds a free UDP port on 127.0.0.1 and writes it there)
"""

import socket
import sys


def answer(query: bytes) -> bytes | None:
    """NXDOMAIN for `query`: its id and question, no records."""
    if len(query) < 12:
        return None
    end = 12
    while end < len(query) and query[end] != 0:
        end += query[end] + 1
    end += 5  # the root label, QTYPE and QCLASS
    if end > len(query):
        return None
    # QR, the query's opcode and RD; RA and RCODE 3 (NXDOMAIN). One question, nothing else.
    flags = bytes([0x80 | (query[2] & 0x79), 0x83])
    return query[:2] + flags + b"\x00\x01" + bytes(6) + query[12:end]


def main() -> None:
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.bind(("127.0.0.1", 0))
    with open(sys.argv[1], "w", encoding="ascii") as port_file:
        port_file.write(str(sock.getsockname()[1]))
    while True:
        query, peer = sock.recvfrom(4096)
        reply = answer(query)
        if reply is not None:
            sock.sendto(reply, peer)


if __name__ == "__main__":
    main()
