//! The official Postmark Node SDK (postmark.js, `postmark` from npm, pinned in
//! `tests/sdk/postmark-node`), unchanged, against the real binary's `/postmark` over HTTPS with
//! certificate verification (`NODE_EXTRA_CA_CERTS` names the server's certificate), with
//! `new ServerClient(key, { requestHost: "<host>/postmark" })`: a send to several recipients
//! with an attachment that arrives at an SMTP sink signed twice for the domain, the same send
//! again (Postmark has no Idempotency-Key: it is a second message), a batch with an invalid
//! item, a send and a batch with a template named by `TemplateAlias`, and the errors an SDK
//! user handles: `InvalidAPIKeyError`, `InvalidEmailRequestError`, `InactiveRecipientsError`
//! with the addresses the SDK parsed, a template that does not exist, an endpoint not served.
//!
//! Without Node the test prints `skipped: …` (fails under `TIDINGS_TEST_REQUIRE_ALL=1`, as
//! `./test` runs it); `./test` runs `npm ci`, and the test runs it when the SDK is missing.

use mail_parser::MessageParser;
use serde_json::{Value, json};

use crate::common::block_on;
use crate::common::sdk::{DOMAIN, Setup, attachments, node_sdk_ready, printed};

#[test]
fn the_postmark_node_sdk_sends_and_fails_as_its_users_expect() {
    let test = "the_postmark_node_sdk_sends_and_fails_as_its_users_expect";
    if node_sdk_ready(test, "postmark-node", &["postmark"]) {
        block_on(drive_and_check());
    }
}

/// Runs `drive.mjs` against a server with a template and two suppressed addresses, and checks
/// what the SDK returned and threw, the messages it made and the mail that arrived.
async fn drive_and_check() {
    let s = Setup::start().await;
    let key = s.server.key().to_owned();
    let (status, body) = s
        .server
        .post("/v1/templates", &key, json!({"name": "welcome", "subject": "Welcome {{name}}", "text": "Hi {{name}}"}))
        .await;
    assert_eq!(status, 201, "{body}");
    for email in ["gone@x.example", "left@y.example"] {
        let (status, body) = s.server.post("/v1/suppressions", &key, json!({"email": email})).await;
        assert!(status == 201 || status == 200, "{body}");
    }
    let host = s.server.url("/postmark");
    let output = s
        .driver("node", "postmark-node/drive.mjs")
        .env("POSTMARK_HOST", host.strip_prefix("https://").expect("an https URL"))
        .env("TEMPLATE", "welcome")
        .env("SUPPRESSED", "gone@x.example,left@y.example")
        .env("NODE_EXTRA_CA_CERTS", s.server.cert_path())
        .output()
        .await
        .expect("node runs");
    let out = printed(&output, "drive.mjs");

    // The send: Postmark's response, and an ordinary Tidings message.
    let sent = &out["send"]["data"];
    assert_eq!((sent["ErrorCode"].as_u64(), sent["Message"].as_str()), (Some(0), Some("OK")), "{}", out["send"]);
    assert_eq!(sent["To"], "ann@x.example,bob@y.example");
    assert!(sent["SubmittedAt"].is_string());
    let id = sent["MessageID"].as_str().expect("a MessageID");
    let again = out["again"]["data"]["MessageID"].as_str().expect("a second MessageID");
    assert_ne!(again, id, "no Idempotency-Key in Postmark's API: the same call is another message");
    let (status, message) = s.server.get(&format!("/v1/messages/{id}"), &key).await;
    assert_eq!(status, 200, "{message}");
    let message = &message["data"];
    assert_eq!(message["tags"], json!([{"name": "tag", "value": "postmark-node"}]));
    assert_eq!(message["metadata"], json!({"order": "42"}));

    // What arrived: one copy per recipient, signed twice by the domain, with the file.
    let provider_id = wait_for_provider_id(&s, &key, id).await;
    let copies = s.delivered_copies(&provider_id).await;
    assert_eq!(attachments(&copies[0].data), [("hello.txt".to_owned(), b"attached bytes\n".to_vec())]);
    let parsed = MessageParser::default().parse(&copies[0].data).expect("the copy parses");
    assert_eq!(parsed.header_raw("X-Campaign").map(str::trim), Some("sdk"));
    assert_eq!(parsed.header_raw("Reply-To").map(str::trim), Some(format!("support@{DOMAIN}").as_str()));
    assert!(parsed.header("Bcc").is_none(), "no Bcc header");

    // The batch: 200, one result per item, the invalid one refused in its place.
    let codes = |case: &str| -> Vec<u64> {
        let items = out[case]["data"].as_array().unwrap_or_else(|| panic!("{case}: {}", out[case]));
        items.iter().map(|i| i["ErrorCode"].as_u64().expect("an ErrorCode")).collect()
    };
    assert_eq!(codes("batch"), [0, 300, 0], "{}", out["batch"]);
    assert!(out["batch"]["data"][0]["MessageID"].is_string());

    // Templates by TemplateAlias (a Tidings template's name), rendered with TemplateModel.
    let templated =
        out["withTemplate"]["data"]["MessageID"].as_str().unwrap_or_else(|| panic!("{}", out["withTemplate"]));
    let (_, message) = s.server.get(&format!("/v1/messages/{templated}"), &key).await;
    assert_eq!(message["data"]["subject"], "Welcome Ann");
    assert_eq!(codes("batchWithTemplates"), [0, 1101], "{}", out["batchWithTemplates"]);

    // The errors, as the SDK built them.
    let error = |case: &str| -> &Value {
        let error = &out[case]["error"];
        assert!(error.is_object(), "{case}: {}", out[case]);
        error
    };
    let expect = |case: &str, class: &str, code: u64, status: u64| {
        let e = error(case);
        assert_eq!(
            (e["class"].as_str(), e["code"].as_u64(), e["statusCode"].as_u64()),
            (Some(class), Some(code), Some(status)),
            "{case}: {e}"
        );
    };
    expect("badKey", "InvalidAPIKeyError", 10, 401);
    expect("invalid", "InvalidEmailRequestError", 300, 422);
    expect("inactive", "InactiveRecipientsError", 406, 422);
    assert_eq!(error("inactive")["recipients"], json!(["gone@x.example", "left@y.example"]), "the SDK's parse");
    expect("noTemplate", "ApiInputError", 1101, 422);
    assert_eq!(error("unserved")["statusCode"], 404, "{}", out["unserved"]);
}

/// The message's `Message-ID` (the provider id), once it has been sent.
async fn wait_for_provider_id(s: &Setup, key: &str, id: &str) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let (_, body) = s.server.get(&format!("/v1/messages/{id}"), key).await;
        if let Some(provider) = body["data"]["providerMessageId"].as_str() {
            return provider.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "never sent: {body}");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}
