"""Drives the official Resend Python SDK (resend==2.51.0 from PyPI, unchanged) against
Tidings' /resend API and prints one JSON object of what it got back, for
tests/tests/it/resend_sdk.rs to assert on. Env: RESEND_BASE_URL, TIDINGS_KEY, FROM, TO
(comma separated), CC, BCC, REPLY_TO, FILE_URL (a file to attach by `path`), SUPPRESSED (a
suppressed address), NEW_DOMAIN (a domain to add and remove); REQUESTS_CA_BUNDLE names the
server's certificate."""

import json
import os
import time

import resend


def outcome(call):
    """The SDK's answer as JSON, or the error it raised: its class, code, type and message."""
    try:
        answer = call()
        answer = dict(answer) if isinstance(answer, dict) else answer
        if isinstance(answer, dict):
            answer.pop("http_headers", None)
        return {"data": answer}
    except resend.exceptions.ResendError as e:
        return {"error": {"class": type(e).__name__, "code": e.code, "type": e.error_type, "message": e.message}}


resend.api_url = os.environ["RESEND_BASE_URL"]
resend.api_key = os.environ["TIDINGS_KEY"]
sender, to = os.environ["FROM"], os.environ["TO"].split(",")
out = {}

email = {
    "from": sender,
    "to": to,
    "cc": [os.environ["CC"]],
    "bcc": os.environ["BCC"],
    "reply_to": os.environ["REPLY_TO"],
    "subject": "Hello from the Resend Python SDK",
    "html": "<p>Hello from Python</p>",
    "tags": [{"name": "source", "value": "resend_python"}],
    # The Python SDK's documented form: the file's bytes as a list of ints.
    "attachments": [
        {"filename": "list.txt", "content": list(b"list of bytes\n")},
        {"filename": "remote.txt", "path": os.environ["FILE_URL"]},
    ],
}
out["send"] = outcome(lambda: resend.Emails.send(email, {"idempotency_key": "py-send-1"}))
out["retry"] = outcome(lambda: resend.Emails.send(email, {"idempotency_key": "py-send-1"}))
sent = out["send"].get("data", {}).get("id")

out["batch"] = outcome(
    lambda: resend.Batch.send(
        [
            {"from": sender, "to": [to[0]], "subject": "Py batch one", "text": "one"},
            {"from": sender, "to": [to[0]], "subject": "Py batch two", "text": "two"},
        ]
    )
)

out["permissive"] = outcome(
    lambda: resend.Batch.send(
        [
            {"from": sender, "to": [to[0]], "subject": "Py batch three", "text": "three"},
            {"from": sender, "to": ["not an address"], "subject": "Py batch four", "text": "four"},
        ],
        {"batch_validation": "permissive"},
    )
)

deadline = time.time() + 20
while True:
    out["get"] = outcome(lambda: resend.Emails.get(sent))
    if out["get"].get("data", {}).get("last_event") == "delivered" or time.time() > deadline:
        break
    time.sleep(0.2)

out["list"] = outcome(lambda: resend.Emails.list({"limit": 10}))

# Domains: add, list, read, check, remove.
out["domainCreate"] = outcome(lambda: resend.Domains.create({"name": os.environ["NEW_DOMAIN"], "region": "eu-west-1"}))
domain_id = out["domainCreate"].get("data", {}).get("id")
out["domainList"] = outcome(lambda: resend.Domains.list())
out["domainGet"] = outcome(lambda: resend.Domains.get(domain_id))
out["domainVerify"] = outcome(lambda: resend.Domains.verify(domain_id))
out["domainVerified"] = outcome(lambda: resend.Domains.get(domain_id))
out["domainRemove"] = outcome(lambda: resend.Domains.remove(domain_id))
out["domainGone"] = outcome(lambda: resend.Domains.get(domain_id))

# API keys: a sending key sends but manages nothing; removed, it fails.
out["keyCreate"] = outcome(lambda: resend.ApiKeys.create({"name": "sdk sender", "permission": "sending_access"}))
full_key, token = resend.api_key, out["keyCreate"].get("data", {}).get("token")
resend.api_key = token
out["sendByNewKey"] = outcome(lambda: resend.Emails.send({"from": sender, "to": [to[0]], "subject": "By the new key", "text": "k"}))
out["domainsBySender"] = outcome(lambda: resend.Domains.list())
resend.api_key = full_key
out["keyList"] = outcome(lambda: resend.ApiKeys.list())
out["keyRemove"] = outcome(lambda: resend.ApiKeys.remove(out["keyCreate"].get("data", {}).get("id")))
resend.api_key = token
out["sendByRemovedKey"] = outcome(lambda: resend.Emails.send({"from": sender, "to": [to[0]], "subject": "Removed", "text": "no"}))
resend.api_key = full_key
out["suppressed"] = outcome(lambda: resend.Emails.send({"from": sender, "to": [os.environ["SUPPRESSED"]], "subject": "S", "text": "no"}))

resend.api_key = "tid_not_a_real_key_at_all"
out["badKey"] = outcome(lambda: resend.Emails.send(email))
resend.api_key = os.environ["TIDINGS_KEY"]
out["invalid"] = outcome(lambda: resend.Emails.send({**email, "to": ["not an address"]}))
out["notFound"] = outcome(lambda: resend.Emails.get("msg_01J00000000000000000000000"))

print(json.dumps(out))
