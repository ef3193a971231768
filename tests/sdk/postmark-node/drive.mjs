// Drives the official Postmark Node SDK (postmark.js), unchanged, against Tidings' /postmark
// API, and prints one JSON object of what it got back for tests/tests/it/postmark_sdk.rs to
// assert on. Env: POSTMARK_HOST (127.0.0.1:<port>/postmark: the SDK's requestHost),
// TIDINGS_KEY, FROM, TO (comma separated, as Postmark takes it), CC, BCC, REPLY_TO,
// TEMPLATE (a Tidings template's name), SUPPRESSED (comma-separated addresses on the
// suppression list); NODE_EXTRA_CA_CERTS names the server's certificate.
import postmark from 'postmark';

const env = (name) => {
  const value = process.env[name];
  if (!value) throw new Error(`${name} is not set`);
  return value;
};

const client = new postmark.ServerClient(env('TIDINGS_KEY'), { requestHost: env('POSTMARK_HOST') });
const From = env('FROM');
const To = env('TO');
const first = To.split(',')[0];
const out = {};

// An SDK call's result, or the error it threw as the SDK built it: its class, code, status and,
// for inactive recipients, the addresses it parsed from the message.
const run = async (call) => {
  try {
    return { data: await call() };
  } catch (e) {
    return {
      error: { class: e.constructor.name, name: e.name, code: e.code, statusCode: e.statusCode, message: e.message, recipients: e.recipients },
    };
  }
};

const email = {
  From,
  To,
  Cc: env('CC'),
  Bcc: env('BCC'),
  ReplyTo: env('REPLY_TO'),
  Subject: 'Hello from the Postmark SDK',
  HtmlBody: '<p>Hello <strong>there</strong></p>',
  TextBody: 'Hello there',
  Tag: 'postmark-node',
  Metadata: { order: '42' },
  Headers: [{ Name: 'X-Campaign', Value: 'sdk' }],
  TrackOpens: false,
  TrackLinks: postmark.Models.LinkTrackingOptions.None,
  MessageStream: 'outbound',
  Attachments: [
    { Name: 'hello.txt', Content: Buffer.from('attached bytes\n').toString('base64'), ContentType: 'text/plain', ContentID: null },
  ],
};

out.send = await run(() => client.sendEmail(email));
// Postmark's API has no Idempotency-Key: the same call again is another message.
out.again = await run(() => client.sendEmail(email));

out.batch = await run(() =>
  client.sendEmailBatch([
    { From, To: first, Subject: 'Batch one', TextBody: 'one' },
    { From, To: 'not an address', Subject: 'Batch two', TextBody: 'two' },
    { From, To: first, Subject: 'Batch three', HtmlBody: '<p>three</p>' },
  ]),
);

const template = env('TEMPLATE');
out.withTemplate = await run(() =>
  client.sendEmailWithTemplate({ From, To: first, TemplateAlias: template, TemplateModel: { name: 'Ann' } }),
);
out.batchWithTemplates = await run(() =>
  client.sendEmailBatchWithTemplates([
    { From, To: first, TemplateAlias: template, TemplateModel: { name: 'Bob' } },
    { From, To: first, TemplateAlias: 'no-such-template', TemplateModel: {} },
  ]),
);

out.badKey = await run(() => new postmark.ServerClient('tid_not_a_real_key_at_all', { requestHost: env('POSTMARK_HOST') }).sendEmail(email));
out.invalid = await run(() => client.sendEmail({ ...email, To: 'not an address' }));
out.inactive = await run(() => client.sendEmail({ ...email, To: env('SUPPRESSED'), Cc: undefined, Bcc: undefined }));
out.noTemplate = await run(() => client.sendEmailWithTemplate({ From, To: first, TemplateAlias: 'no-such-template', TemplateModel: {} }));
out.unserved = await run(() => client.getBounces());

console.log(JSON.stringify(out));
