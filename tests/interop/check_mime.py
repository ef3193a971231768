#!/usr/bin/env python3
"""Checks that delivered messages are well-formed MIME that any receiver parses the same way.

Usage: check_mime.py FILE...

For each file prints one JSON object per line and check: {"item", "check", "ok", "reason"}:
- `CRLF only`: every CR is followed by LF and every LF preceded by CR (RFC 5322 §2.3);
- `no NUL`: no NUL octet anywhere;
- `lines <= 998`: no line longer than 998 octets without its CRLF (RFC 5322 §2.1.1);
- `transfer encoding`: every leaf part is base64 or quoted-printable, except text that is
  7bit as written (ASCII, no NUL, no bare CR or LF, lines of at most 998 octets);
- `parser defects`: Python's `email` parser (policy=default) finds no defect in the message
  or any part;
- `text alternative`: every text/html body part has a text/plain alternative (it sits in
  multipart/alternative, directly or inside multipart/related, beside a text/plain);
- `file names`: every attachment or inline part with a file name has it twice, as
  `Content-Disposition: ...; filename` and as the `Content-Type`'s `name`, both reading back
  the same with `policy=default`, and the `name` is one a reader without RFC 2231 reads: a
  plain parameter (quoted ASCII or RFC 2047 words), never `name*=`;
- `text charset`: every text/* attachment whose bytes are UTF-8 declares a charset, and
  every declared charset decodes its part's bytes.
Exits 0 when it could run the checks (whatever their results), 2 on bad usage.
"""

import email
import email.policy
import json
import re
import sys

BARE_CR = re.compile(rb"\r(?!\n)")
BARE_LF = re.compile(rb"(?<!\r)\n")


def position(raw, offset):
    """`line N` (1-based) of an offset, for reasons a person can find."""
    return "line %d" % (raw.count(b"\n", 0, offset) + 1)


def line_endings(raw):
    cr, lf = BARE_CR.search(raw), BARE_LF.search(raw)
    problems = []
    if cr:
        problems.append(f"bare CR at {position(raw, cr.start())} ({len(BARE_CR.findall(raw))} in all)")
    if lf:
        problems.append(f"bare LF at {position(raw, lf.start())} ({len(BARE_LF.findall(raw))} in all)")
    return (not problems, "; ".join(problems) or "CRLF only")


def nul(raw):
    at = raw.find(b"\0")
    return (at < 0, f"NUL at {position(raw, at)}" if at >= 0 else "none")


def line_lengths(raw):
    longest, where = 0, 0
    for number, line in enumerate(raw.split(b"\r\n"), 1):
        if len(line) > longest:
            longest, where = len(line), number
    return (longest <= 998, f"longest line {longest} octets (line {where})")


def seven_bit(payload):
    """Why `payload` (the bytes of a part as written) is not 7bit, or None."""
    if any(b > 127 for b in payload):
        return "8-bit octets"
    if b"\0" in payload:
        return "NUL"
    if BARE_CR.search(payload) or BARE_LF.search(payload):
        return "bare CR or LF"
    if any(len(line) > 998 for line in payload.split(b"\r\n")):
        return "a line over 998 octets"
    return None


def leaves(message):
    """(path, part) of every non-multipart part, the path as content types from the top."""
    out = []

    def walk(part, path):
        here = path + [part.get_content_type()]
        if part.is_multipart():
            for child in part.get_payload():
                walk(child, here)
        else:
            out.append((" > ".join(here), part))

    walk(message, [])
    return out


def transfer_encodings(message):
    problems = []
    for path, part in leaves(message):
        cte = (part.get("Content-Transfer-Encoding") or "7bit").strip().lower()
        if cte in ("base64", "quoted-printable"):
            continue
        payload = part.get_payload(decode=False)
        payload = payload.encode("utf-8", "surrogateescape") if isinstance(payload, str) else bytes(payload)
        if part.get_content_maintype() != "text":
            problems.append(f"{path}: {part.get_content_type()} sent as {cte}")
        elif cte != "7bit":
            problems.append(f"{path}: text sent as {cte}")
        elif (why := seven_bit(payload)) is not None:
            problems.append(f"{path}: declared 7bit but holds {why}")
    return (not problems, "; ".join(problems) or "every part 7bit text, base64 or quoted-printable")


def defects(message):
    found = [f"message: {d!r}" for d in message.defects]
    for part in message.walk():
        if part is not message:
            found += [f"{part.get_content_type()}: {d!r}" for d in part.defects]
    return (not found, "; ".join(found) or "none")


def text_alternatives(message):
    def is_body_html(part):
        return part.get_content_type() == "text/html" and part.get_content_disposition() != "attachment"

    parents = {}
    for part in message.walk():
        if part.is_multipart():
            for child in part.get_payload():
                parents[id(child)] = part
    missing = []
    for part in message.walk():
        if not is_body_html(part):
            continue
        container = parents.get(id(part))
        if container is not None and container.get_content_type() == "multipart/related":
            container, part = parents.get(id(container)), container
        siblings = container.get_payload() if container is not None and container.get_content_type() == "multipart/alternative" else []
        if not any(s is not part and s.get_content_type() == "text/plain" for s in siblings):
            missing.append("text/html without a text/plain alternative" + (" (a single-part message)" if container is None else f" (in {container.get_content_type()})"))
    return (not missing, "; ".join(missing) or "every HTML part has a text/plain alternative")


def attachments(message):
    return [p for p in message.walk() if not p.is_multipart() and p.get_content_disposition() in ("attachment", "inline")]


def file_names(message):
    problems, seen = [], 0
    for part in attachments(message):
        filename = part.get_filename()
        if filename is None:
            continue
        seen += 1
        header = part["Content-Type"]
        name = header.params.get("name") if hasattr(header, "params") else None
        raw = "".join(str(v) for k, v in part.raw_items() if k.lower() == "content-type")
        if name is None:
            problems.append(f"{filename!r}: no name= on Content-Type")
        elif name != filename:
            problems.append(f"{filename!r}: name= reads {name!r}")
        elif re.search(r"(?i)\bname\*", raw):
            problems.append(f"{filename!r}: name= only in RFC 2231 form")
    return (not problems, "; ".join(problems) or f"{seen} file names, each also as name=")


def text_charsets(message):
    problems, seen = [], 0
    for part in attachments(message):
        if part.get_content_maintype() != "text":
            continue
        seen += 1
        data = part.get_payload(decode=True) or b""
        charset = part.get_param("charset")
        if charset is None:
            try:
                data.decode("utf-8")
                problems.append(f"{part.get_filename()!r}: UTF-8 text without a charset")
            except UnicodeDecodeError:
                pass
            continue
        try:
            data.decode(str(charset))
        except (LookupError, UnicodeDecodeError) as e:
            problems.append(f"{part.get_filename()!r}: charset={charset} does not decode it ({e})")
    return (not problems, "; ".join(problems) or f"{seen} text attachments, each with a true charset")


def check(path):
    with open(path, "rb") as f:
        raw = f.read()
    message = email.message_from_bytes(raw, policy=email.policy.default)
    results = [
        ("CRLF only", line_endings(raw)),
        ("no NUL", nul(raw)),
        ("lines <= 998", line_lengths(raw)),
        ("transfer encoding", transfer_encodings(message)),
        ("parser defects", defects(message)),
        ("text alternative", text_alternatives(message)),
        ("file names", file_names(message)),
        ("text charset", text_charsets(message)),
    ]
    return [{"item": path, "check": c, "ok": ok, "reason": reason} for c, (ok, reason) in results]


def main():
    if len(sys.argv) < 2 or sys.argv[1].startswith("-"):
        sys.exit("usage: check_mime.py FILE...")
    for path in sys.argv[1:]:
        for result in check(path):
            print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
