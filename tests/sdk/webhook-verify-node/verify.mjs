// Verifies webhook requests Tidings sent to a resend-format endpoint with two verifiers that
// are not ours: the svix library's Webhook.verify and the Resend SDK's webhooks.verify.
// Reads a JSON array of {secret, body, headers} on stdin; prints one
// {svix: {ok, type|error}, resend: {ok, type|error}} per request, in order, as JSON.
import { Webhook } from "svix";
import { Resend } from "resend";

const input = JSON.parse(await new Promise((resolve) => {
  let text = "";
  process.stdin.on("data", (chunk) => (text += chunk));
  process.stdin.on("end", () => resolve(text));
}));

// The SDK wants a key to be constructed; verify() does not use it.
const resend = new Resend("re_unused_by_verify");

function attempt(verify) {
  try {
    const event = verify();
    return { ok: true, type: event.type };
  } catch (e) {
    return { ok: false, error: String(e && e.message ? e.message : e) };
  }
}

const results = input.map(({ secret, body, headers }) => ({
  svix: attempt(() => new Webhook(secret).verify(body, headers)),
  resend: attempt(() =>
    resend.webhooks.verify({
      payload: body,
      headers: {
        id: headers["svix-id"],
        timestamp: headers["svix-timestamp"],
        signature: headers["svix-signature"],
      },
      webhookSecret: secret,
    }),
  ),
}));
process.stdout.write(JSON.stringify(results));
