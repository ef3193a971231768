// Drives the official Resend Node SDK, unchanged, against Tidings' /resend API, and prints
// one JSON object of what it got back for tests/tests/it/resend_sdk.rs to assert on.
// Env: RESEND_BASE_URL (https://127.0.0.1:<port>/resend), TIDINGS_KEY, FROM, TO (comma
// separated), CC, BCC, REPLY_TO, FILE_URL (a file to attach by `path`), SUPPRESSED (a
// suppressed address), NEW_DOMAIN (a domain to add and remove); NODE_EXTRA_CA_CERTS names
// the server's certificate.
import { Resend } from 'resend';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

// The SDK reads RESEND_BASE_URL itself; the key is a Tidings key.
const resend = new Resend(env('TIDINGS_KEY'));
const from = env('FROM');
const to = env('TO').split(',');
const out = { baseUrl: resend.baseUrl };

const email = {
  from,
  to,
  cc: env('CC'),
  bcc: [env('BCC')],
  replyTo: env('REPLY_TO'),
  subject: 'Hello from the Resend SDK',
  html: '<p>Hello <strong>there</strong></p>',
  text: 'Hello there',
  headers: { 'X-Campaign': 'sdk' },
  tags: [{ name: 'source', value: 'resend_node' }],
  attachments: [
    { filename: 'hello.txt', content: Buffer.from('attached bytes\n'), contentType: 'text/plain' },
    { filename: 'b64.txt', content: Buffer.from('base64 bytes\n').toString('base64') },
    { filename: 'remote.txt', path: env('FILE_URL') },
  ],
};

const sent = await resend.emails.send(email, { idempotencyKey: 'sdk-send-1' });
out.send = sent;
if (!sent.data) {
  // Nothing below can run without the id: show what the SDK got.
  console.log(JSON.stringify(out));
  process.exit(0);
}
out.retry = await resend.emails.send(email, { idempotencyKey: 'sdk-send-1' });
out.reused = await resend.emails.send({ ...email, subject: 'Another' }, { idempotencyKey: 'sdk-send-1' });

out.batch = await resend.batch.send([
  { from, to: [to[0]], subject: 'Batch one', text: 'one' },
  { from, to: [to[0]], subject: 'Batch two', html: '<p>two</p>' },
]);
out.permissive = await resend.batch.send(
  [
    { from, to: [to[0]], subject: 'Batch three', text: 'three' },
    { from, to: ['not an address'], subject: 'Batch four', text: 'four' },
  ],
  { batchValidation: 'permissive' },
);

// Wait for the send to be delivered (the sink accepts at once).
const deadline = Date.now() + 20000;
let got;
do {
  got = await resend.emails.get(sent.data.id);
  if (got.data?.last_event === 'delivered') break;
  await new Promise((r) => setTimeout(r, 200));
} while (Date.now() < deadline);
out.get = got;

out.list = await resend.emails.list({ limit: 2 });
if (out.list.data?.has_more) {
  const last = out.list.data.data.at(-1).id;
  out.listAfter = await resend.emails.list({ limit: 100, after: last });
}

const inAnHour = new Date(Date.now() + 3600_000).toISOString();
const scheduled = await resend.emails.send({ from, to: [to[0]], subject: 'Later', text: 'later', scheduledAt: inAnHour });
out.scheduled = scheduled;
out.update = await resend.emails.update({ id: scheduled.data?.id, scheduledAt: new Date(Date.now() + 7200_000).toISOString() });
out.cancel = await resend.emails.cancel(scheduled.data?.id);
out.canceled = await resend.emails.get(scheduled.data?.id);

// Domains: add, list, read, check, remove.
out.domainCreate = await resend.domains.create({ name: env('NEW_DOMAIN'), region: 'eu-west-1' });
const domainId = out.domainCreate.data?.id;
out.domainList = await resend.domains.list();
out.domainGet = await resend.domains.get(domainId);
out.domainVerify = await resend.domains.verify(domainId);
out.domainVerified = await resend.domains.get(domainId);
out.domainRemove = await resend.domains.remove(domainId);
out.domainGone = await resend.domains.get(domainId);

// API keys: a sending key sends but manages nothing; removed, it fails.
out.keyCreate = await resend.apiKeys.create({ name: 'sdk sender', permission: 'sending_access' });
const sender = new Resend(out.keyCreate.data?.token);
out.sendByNewKey = await sender.emails.send({ from, to: [to[0]], subject: 'By the new key', text: 'new key' });
out.domainsBySender = await sender.domains.list();
out.keyList = await resend.apiKeys.list();
out.keyRemove = await resend.apiKeys.remove(out.keyCreate.data?.id);
out.sendByRemovedKey = await sender.emails.send({ from, to: [to[0]], subject: 'Removed key', text: 'no' });

out.suppressed = await resend.emails.send({ from, to: [env('SUPPRESSED')], subject: 'Suppressed', text: 'no' });
out.badKey = await new Resend('tid_not_a_real_key_at_all').emails.send(email);
out.invalid = await resend.emails.send({ ...email, to: ['not an address'] });
out.notFound = await resend.emails.get('msg_01J00000000000000000000000');

console.log(JSON.stringify(out));
