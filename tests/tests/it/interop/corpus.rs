//! The message shapes the interop pass sends: every send field alone and in combination,
//! the encodings a receiver must read back (non-ASCII, long lines, mixed line ends, dots and
//! `From ` at line starts), every kind of attachment, and every way in (a single send, a
//! template, a batch, a scheduled send, SMTP submission). Each shape has its own recipient.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};

/// The verified sending domain.
pub const DOMAIN: &str = "interop.example";

/// How a shape reaches the server.
#[derive(Clone)]
pub enum Via {
    /// `POST /v1/messages` with this body plus `to`.
    Api(Value),
    /// One item of one `POST /v1/messages/batch` (all batch shapes together, in order).
    Batch(Value),
    /// `POST /v1/messages` with this body plus `to` and the corpus template: its current
    /// version, or pinned to version 2 with `templateVersionId`.
    Template { pinned: bool, body: Value },
    /// `POST /v1/messages` with this body plus `to` and `scheduledAt` two seconds ahead.
    Scheduled(Value),
    /// SMTP submission of this message (`To` and `From` are written by the test): its
    /// header lines after `From`/`To`, an empty line and the body, CRLF line ends.
    Submission(String),
}

/// One shape: a name for the table and how it is sent.
#[derive(Clone)]
pub struct Shape {
    /// What is special about it, as the table shows it.
    pub name: &'static str,
    /// How it is sent.
    pub via: Via,
}

/// The template every template shape renders: version 1 (current) has a subject, text and
/// HTML with placeholders; version 2 only HTML.
pub fn template() -> (Value, Value) {
    let v1 = json!({
        "name": "interop receipt",
        "subject": "Bestellung {{order}} für {{name}}",
        "text": "Hallo {{name}},\n\n{{#each items}}- {{this}}\n{{/each}}\nGrüße, das Team",
        "html": "<p>Hallo <b>{{name}}</b>,</p><ul>{{#each items}}<li>{{this}}</li>{{/each}}</ul><p>Grüße</p>",
    });
    let v2 = json!({"subject": "v2: order {{order}}", "html": "<h1>Order {{order}}</h1><p>{{name}}, thanks.</p>"});
    (v1, v2)
}

fn file(filename: &str, content_type: &str, bytes: &[u8]) -> Value {
    json!({"filename": filename, "contentType": content_type, "content": STANDARD.encode(bytes)})
}

fn inline(filename: &str, content_type: &str, bytes: &[u8], content_id: &str) -> Value {
    let mut part = file(filename, content_type, bytes);
    part["contentId"] = json!(content_id);
    part
}

/// A PDF made only of ASCII with LF line ends, as PDF writers produce small ones.
fn ascii_pdf() -> Vec<u8> {
    b"%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [] /Count 0 >> endobj\n\
trailer << /Root 1 0 R >>\n%%EOF\n"
        .to_vec()
}

/// A PDF with binary octets (the usual second-line marker and compressed-looking bytes).
fn binary_pdf() -> Vec<u8> {
    let mut pdf = b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n".to_vec();
    pdf.extend((0..4000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8));
    pdf.extend_from_slice(b"\n%%EOF\n");
    pdf
}

/// The PNG signature, a header chunk and some binary data: enough for a content type check.
fn png() -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89".to_vec();
    png.extend((0..300u32).map(|i| (i * 31 % 256) as u8));
    png
}

/// A stored (uncompressed) ZIP holding `hello.txt`.
fn zip() -> Vec<u8> {
    let mut zip =
        b"PK\x03\x04\x0a\0\0\0\0\0\0\0\0\0\x86\xa6\x10\x36\x06\0\0\0\x06\0\0\0\x09\0\0\0hello.txthello\n".to_vec();
    zip.extend_from_slice(b"PK\x01\x02\x14\x03\x0a\0\0\0\0\0\0\0\0\0\x86\xa6\x10\x36\x06\0\0\0\x06\0\0\0\x09\0\0\0\0\0\0\0\0\0\0\0\xa4\x81\0\0\0\0hello.txt");
    zip.extend_from_slice(b"PK\x05\x06\0\0\0\0\x01\0\x01\0\x37\0\0\0\x2d\0\0\0\0\0");
    zip
}

/// `extra` on top of a text + HTML send from `billing@` [`DOMAIN`].
fn both(extra: Value) -> Value {
    merge(
        json!({"subject": "Your receipt", "text": "Thanks for your order.", "html": "<p>Thanks for your <b>order</b>.</p>"}),
        extra,
    )
}

/// `extra` on top of a text-only send.
fn text(extra: Value) -> Value {
    merge(json!({"subject": "Your receipt", "text": "Thanks for your order."}), extra)
}

fn merge(mut base: Value, extra: Value) -> Value {
    base["from"] = json!(format!("billing@{DOMAIN}"));
    for (k, v) in extra.as_object().expect("an object") {
        if v.is_null() {
            base.as_object_mut().expect("an object").remove(k);
        } else {
            base[k] = v.clone();
        }
    }
    base
}

/// The same shape with `tracking` taken out, when it asks for tracking: what its sender's
/// content scores without what tracking adds.
pub fn untracked(shape: &Shape) -> Option<Shape> {
    let Via::Api(body) = &shape.via else { return None };
    let tracking = body.get("tracking")?;
    if tracking.as_object().is_some_and(|t| t.values().all(|v| v == &json!(false))) {
        return None;
    }
    let mut body = body.clone();
    body.as_object_mut().expect("an object").remove("tracking");
    Some(Shape { name: shape.name, via: Via::Api(body) })
}

/// Every shape, in the order the table shows them.
pub fn shapes() -> Vec<Shape> {
    let api = |name, body| Shape { name, via: Via::Api(body) };
    let long_words = "Ihre Rechnung für März ist da und wartet auf Sie ".repeat(16);
    let long_ascii = "Your monthly statement is ready and waiting for you ".repeat(20);
    let long_word: String = "x".repeat(990);
    let logo = png();
    vec![
        api("text only", text(json!({}))),
        api("html only", merge(json!({"subject": "Your receipt", "html": "<p>Thanks for your <b>order</b>.</p>"}), json!({}))),
        api("text and html", both(json!({}))),
        api("non-ASCII subject", both(json!({"subject": "Grüße aus Köln ✓ 日本語 🎉"}))),
        api("non-ASCII display name", both(json!({"from": format!("Zoë Łukasiewicz-Müller 日本 <billing@{DOMAIN}>")}))),
        api("ASCII display name with comma", both(json!({"from": format!("\"Billing, Acme\" <billing@{DOMAIN}>")}))),
        api("non-ASCII text body", text(json!({"text": "Grüße, Zoë!\nお買い上げありがとうございます。\nΚαλημέρα — ¡hola! 🎉"}))),
        api("non-ASCII html body", both(json!({"html": "<p>Grüße, <b>Zoë</b>! お買い上げありがとうございます。 🎉</p>"}))),
        api("long ASCII subject (900 chars)", both(json!({"subject": long_ascii[..900].trim_end()}))),
        api("long non-ASCII subject", both(json!({"subject": long_words.trim_end()}))),
        api("subject of one 990-char word", both(json!({"subject": long_word}))),
        api("subject that looks encoded", both(json!({"subject": "=?utf-8?q?not_encoded?= and a tab\there"}))),
        api("long text line (5000 chars)", text(json!({"text": format!("start {} end", "a".repeat(5000))}))),
        api("long html line (5000 chars)", both(json!({"html": format!("<p>{}</p>", "word ".repeat(1000))}))),
        api("long non-ASCII line", text(json!({"text": "ü".repeat(3000)}))),
        api(
            "custom headers",
            both(json!({"headers": {"X-Campaign": "spring-2026", "X-Entity-Ref-ID": "r".repeat(900), "X-Note": "tab\tinside"}})),
        ),
        api(
            "List-Unsubscribe and -Post",
            both(json!({"headers": {
                "List-Unsubscribe": format!("<https://{DOMAIN}/unsubscribe/ann?token=abc123>, <mailto:unsubscribe@{DOMAIN}?subject=unsubscribe>"),
                "List-Unsubscribe-Post": "List-Unsubscribe=One-Click",
            }})),
        ),
        // Gmail's feedback loop reads it only when a signature covers it.
        api("Feedback-ID", both(json!({"headers": {"Feedback-ID": "receipts:acme:interop"}}))),
        api("Reply-To (one)", both(json!({"replyTo": format!("help@{DOMAIN}")}))),
        api(
            "Reply-To (several)",
            both(json!({"replyTo": [format!("help@{DOMAIN}"), "accounts@example.net", "billing-team@example.org"]})),
        ),
        api(
            "In-Reply-To and References",
            both(json!({"headers": {
                "In-Reply-To": "<thread-1@example.net>",
                "References": (1..=20).map(|i| format!("<thread-{i}@example.net>")).collect::<Vec<_>>().join(" "),
            }})),
        ),
        api("attachment: binary PDF", both(json!({"attachments": [file("invoice.pdf", "application/pdf", &binary_pdf())]}))),
        api("attachment: ASCII-only PDF", both(json!({"attachments": [file("statement.pdf", "application/pdf", &ascii_pdf())]}))),
        api("attachment: PNG", both(json!({"attachments": [file("chart.png", "image/png", &logo)]}))),
        api(
            "attachment: ASCII text, LF lines",
            both(json!({"attachments": [file("notes.txt", "text/plain", b"line one\nline two\n.dot line\nFrom here\n")]})),
        ),
        api(
            "attachment: UTF-8 text, charset given",
            text(json!({"attachments": [file("grüße.txt", "text/plain; charset=utf-8", "Grüße aus Köln\n".as_bytes())]})),
        ),
        api(
            "attachment: ASCII text with NUL",
            text(json!({"attachments": [file("log.txt", "text/plain", b"before\0after\r\nend\r\n")]})),
        ),
        api(
            "attachment: CSV, LF lines",
            text(json!({"attachments": [file("orders.csv", "text/csv", b"id,item,price\n1,Tea,3.50\n2,\"Cake, large\",12.00\n")]})),
        ),
        api(
            "attachment: CSV, CRLF lines, UTF-8",
            text(json!({"attachments": [file("kunden.csv", "text/csv", "id;name\r\n1;Müller\r\n2;Łukasz\r\n".as_bytes())]})),
        ),
        api(
            "attachment: calendar invite",
            both(json!({"attachments": [file("invite.ics", "text/calendar", b"BEGIN:VCALENDAR\r\nVERSION:2.0\r\nBEGIN:VEVENT\r\nSUMMARY:Call\r\nDTSTART:20261201T100000Z\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n")]})),
        ),
        api(
            "attachment: JSON, LF lines",
            text(json!({"attachments": [file("order.json", "application/json", b"{\n  \"id\": 17,\n  \"items\": [\"tea\"]\n}\n")]})),
        ),
        api("attachment: ZIP", both(json!({"attachments": [file("archive.zip", "application/zip", &zip())]}))),
        api(
            "attachment: non-ASCII file names",
            both(json!({"attachments": [
                file("Rechnung März 2026 – Übersicht.pdf", "application/pdf", &binary_pdf()),
                file("請求書.csv", "text/csv", b"a,b\n1,2\n"),
            ]})),
        ),
        api(
            "attachments of every kind",
            both(json!({"attachments": [
                file("invoice.pdf", "application/pdf", &binary_pdf()),
                file("statement.pdf", "application/pdf", &ascii_pdf()),
                file("chart.png", "image/png", &logo),
                file("notes.txt", "text/plain", b"plain ascii\n"),
                file("orders.csv", "text/csv", b"a,b\n1,2\n"),
                file("archive.zip", "application/zip", &zip()),
            ]})),
        ),
        api(
            "inline image",
            both(json!({"html": "<p><img src=\"cid:logo\" alt=\"Acme\"> Thanks.</p>", "attachments": [inline("logo.png", "image/png", &logo, "logo")]})),
        ),
        api(
            "everything at once",
            both(json!({
                "from": format!("Zoë from Acme <billing@{DOMAIN}>"),
                "subject": "Rechnung März ✓",
                "html": "<p><img src=\"cid:logo@acme\"> Grüße, <a href=\"https://acme.example/account\">your account</a></p>",
                "replyTo": [format!("help@{DOMAIN}"), "accounts@example.net"],
                "headers": {"X-Campaign": "all", "List-Unsubscribe": "<https://acme.example/u/1>", "List-Unsubscribe-Post": "List-Unsubscribe=One-Click", "In-Reply-To": "<t@example.net>"},
                "tags": [{"name": "plan", "value": "pro"}],
                "metadata": {"customer": "Zoë"},
                "tracking": {"opens": true, "clicks": true},
                "attachments": [inline("logo.png", "image/png", &logo, "logo@acme"), file("invoice.pdf", "application/pdf", &binary_pdf()), file("notes.txt", "text/plain", b"a\nb\n")],
            })),
        ),
        api(
            "tracking on (opens, clicks)",
            both(json!({
                "html": "<p>See <a href=\"https://acme.example/orders/1?x=1&amp;y=2\">your order</a> and <a href=\"https://acme.example/help\" data-tidings-notrack>help</a>.</p>",
                "tracking": {"opens": true, "clicks": true},
            })),
        ),
        api(
            "tracking on, html only",
            merge(json!({"subject": "Tracked", "html": "<p><a href=\"https://acme.example/x\">x</a></p>", "tracking": {"opens": true, "clicks": true}}), json!({})),
        ),
        // Several recipients (contract §10): the row's recipient comes first in `to`; every
        // copy carries the same To/Cc, signed once (per recipient when tracked).
        api(
            "to list with display names",
            both(json!({"to": ["Zoë Ünïcode <zoe-list@inbox.example>", "\"Bob, Jr.\" <bob-list@inbox.example>"]})),
        ),
        api(
            "cc with display names",
            both(json!({"cc": ["\"Doe, Jane\" <jane-cc@inbox.example>", "Ünïcödé Näme <uni-cc@inbox.example>", "plain-cc@inbox.example"]})),
        ),
        api("bcc", text(json!({"bcc": ["hidden-one@inbox.example", "hidden-two@inbox.example"]}))),
        api(
            "to, cc and bcc, tracked",
            both(json!({
                "to": ["Ann <ann-all@inbox.example>"], "cc": "Carol <carol-all@inbox.example>", "bcc": "dan-all@inbox.example",
                "html": "<p>See <a href=\"https://acme.example/orders/2\">your order</a>.</p>",
                "tracking": {"opens": true, "clicks": true},
            })),
        ),
        api("mixed line endings (text)", text(json!({"text": "crlf line\r\nlf line\nlone cr\rend"}))),
        api("mixed line endings (html)", both(json!({"html": "<p>crlf</p>\r\n<p>lf</p>\n<p>lone cr</p>\r<p>end</p>"}))),
        api("trailing spaces and blank lines", text(json!({"text": "line with trailing spaces   \n\ttabbed\t\n\n\n\nlast\n\n\n"}))),
        api("lines starting with dots", text(json!({"text": ".\n..two dots\n.one dot\nmiddle\n.\n"}))),
        api("lines starting with From", text(json!({"text": "From the desk of Ann\nFrom here on\n>From quoted\nFrom "}))),
        api("dots and From in html", both(json!({"html": ".<p>x</p>\n.\nFrom here\n..<p>y</p>"}))),
        Shape {
            name: "template: current version, non-ASCII variables",
            via: Via::Template { pinned: false, body: json!({"variables": {"order": "A-17", "name": "Zoë Müller", "items": ["Tee ☕", "Kuchen 🍰"]}}) },
        },
        Shape {
            name: "template: pinned version 2 (html only)",
            via: Via::Template { pinned: true, body: json!({"variables": {"order": "B-2", "name": "Ann"}}) },
        },
        Shape {
            name: "template: subject and text overridden",
            via: Via::Template {
                pinned: false,
                body: json!({"subject": "Override ✓", "text": "Overridden text.\n.dot\n", "variables": {"order": "C", "name": "Bo", "items": []}}),
            },
        },
        Shape {
            name: "template: variables with mixed line endings",
            via: Via::Template {
                pinned: false,
                body: json!({"subject": "Line endings in variables", "variables": {"order": "D", "name": "Ann\r\nBob\nCy\rDee", "items": ["a\nb", "c\rd"]}}),
            },
        },
        Shape { name: "batch item 1: text", via: Via::Batch(text(json!({}))) },
        Shape { name: "batch item 2: html + attachment", via: Via::Batch(both(json!({"attachments": [file("notes.txt", "text/plain", b"x\ny\n")]}))) },
        Shape { name: "batch item 3: non-ASCII", via: Via::Batch(both(json!({"subject": "Grüße ✓", "text": "Grüße 日本"}))) },
        Shape { name: "scheduled send", via: Via::Scheduled(both(json!({"subject": "Later ✓"}))) },
        Shape {
            name: "SMTP submission: text and html",
            via: Via::Submission(
                "Subject: Submitted\r\nMIME-Version: 1.0\r\nContent-Type: multipart/alternative; boundary=\"b1\"\r\n\r\n\
                 --b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nHello from SMTP.\r\n\
                 --b1\r\nContent-Type: text/html; charset=utf-8\r\n\r\n<p>Hello from <b>SMTP</b>.</p>\r\n--b1--\r\n"
                    .to_owned(),
            ),
        },
        Shape {
            name: "SMTP submission: 8bit, dots, attachment",
            via: Via::Submission(
                "Subject: =?utf-8?q?Gr=C3=BC=C3=9Fe?=\r\nReply-To: help@interop.example\r\nX-Campaign: smtp\r\nMIME-Version: 1.0\r\n\
                 Content-Type: multipart/mixed; boundary=\"m1\"\r\n\r\n\
                 --m1\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Transfer-Encoding: 8bit\r\n\r\nGrüße.\r\n.leading dot\r\nFrom here\r\n\
                 --m1\r\nContent-Type: text/csv; name=\"a.csv\"\r\nContent-Disposition: attachment; filename=\"a.csv\"\r\n\r\na,b\r\n1,2\r\n--m1--\r\n"
                    .to_owned(),
            ),
        },
        Shape {
            // The Cc header names a list address outside the envelope: kept as written.
            name: "SMTP submission: Cc header as written",
            via: Via::Submission(
                "Cc: \"Team, Billing\" <team@interop.example>, =?utf-8?q?J=C3=BCrgen?= <juergen@inbox.example>\r\n\
                 Subject: Copied\r\nMIME-Version: 1.0\r\nContent-Type: text/plain; charset=utf-8\r\n\r\nFor the team.\r\n"
                    .to_owned(),
            ),
        },
    ]
}
