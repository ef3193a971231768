//! The official Resend SDKs, unchanged and pinned (Node: `resend` from npm in
//! `tests/sdk/resend-node`; Python: `resend==2.51.0` from PyPI, pinned in `./test`), against
//! the real binary's `/resend` over HTTPS with certificate verification
//! (`NODE_EXTRA_CA_CERTS` / `REQUESTS_CA_BUNDLE` name the server's certificate):
//! a send to several recipients with attachments that arrives at an SMTP sink signed twice
//! for the domain, an idempotent retry, batches, get (until `delivered`), list, update and
//! cancel, and the errors an SDK user handles. `tests/sdk/*/drive.*` print what the SDK
//! returned as JSON; the tests assert on it.
//!
//! Without Node (or the Python SDK) a test prints `skipped: …` (fails under
//! `TIDINGS_TEST_REQUIRE_ALL=1`, as `./test` runs it); `./test` runs `npm ci` and installs the
//! Python SDK, and the Node test runs `npm ci` when the SDK is not installed yet.

use std::process::Command;

use mail_parser::MessageParser;
use serde_json::Value;

use crate::common::block_on;
use crate::common::sdk::{Setup, attachments, node_sdk_ready, printed};

#[test]
fn the_resend_node_sdk_sends_reads_and_fails_as_its_users_expect() {
    let test = "the_resend_node_sdk_sends_reads_and_fails_as_its_users_expect";
    if !node_sdk_ready(test, "resend-node", "resend") {
        return;
    }
    block_on(async {
        let s = Setup::start().await;
        let output = s
            .driver("node", "resend-node/drive.mjs")
            .env("RESEND_BASE_URL", s.server.url("/resend"))
            .env("NODE_EXTRA_CA_CERTS", s.server.cert_path())
            .output()
            .await
            .expect("node runs");
        let out = printed(&output, "drive.mjs");
        assert_eq!(out["baseUrl"], s.server.url("/resend"), "the SDK took RESEND_BASE_URL");

        // The send, and its retry with the same Idempotency-Key: one message.
        assert_eq!(out["send"]["error"], Value::Null, "{}", out["send"]);
        let id = out["send"]["data"]["id"].as_str().expect("an id").to_owned();
        assert_eq!(out["retry"]["data"]["id"], id.as_str(), "{}", out["retry"]);
        assert_eq!(out["retry"]["headers"]["idempotent-replayed"], "true");
        assert_eq!(out["reused"]["error"]["name"], "invalid_idempotent_request", "{}", out["reused"]);
        assert_eq!(out["reused"]["error"]["statusCode"], 409);

        // Get: Resend's email object, delivered.
        let got = &out["get"]["data"];
        assert_eq!(got["object"], "email", "{}", out["get"]);
        assert_eq!(got["id"], id.as_str());
        assert_eq!(got["last_event"], "delivered", "{got}");
        assert_eq!(got["to"], serde_json::json!(["ann@x.example", "bob@y.example"]));
        assert_eq!(got["cc"], serde_json::json!(["carol@z.example"]));
        assert_eq!(got["subject"], "Hello from the Resend SDK");
        assert_eq!(got["tags"], serde_json::json!([{"name": "source", "value": "resend_node"}]));

        // What arrived: one copy per recipient, signed twice by the domain, with both files.
        let copies = s.delivered_copies(got["message_id"].as_str().expect("the Message-ID")).await;
        let parsed = MessageParser::default().parse(&copies[0].data).expect("the copy parses");
        assert_eq!(
            attachments(&copies[0].data),
            [
                ("hello.txt".to_owned(), b"attached bytes\n".to_vec()),
                ("b64.txt".to_owned(), b"base64 bytes\n".to_vec())
            ]
        );
        assert_eq!(parsed.header_raw("X-Campaign").map(str::trim), Some("sdk"));
        assert!(parsed.header("Bcc").is_none(), "no Bcc header");

        // Batches: strict gives every id; permissive the valid ones and the other's error.
        assert_eq!(out["batch"]["data"]["data"].as_array().map(Vec::len), Some(2), "{}", out["batch"]);
        assert_eq!(out["permissive"]["data"]["data"].as_array().map(Vec::len), Some(1), "{}", out["permissive"]);
        assert_eq!(out["permissive"]["data"]["errors"][0]["index"], 1);

        // List: newest first, paged with `after`.
        let listed = &out["list"]["data"];
        assert_eq!(listed["object"], "list", "{}", out["list"]);
        assert_eq!(listed["has_more"], true);
        let mut ids: Vec<&str> = listed["data"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()).collect();
        ids.extend(out["listAfter"]["data"]["data"].as_array().unwrap().iter().filter_map(|e| e["id"].as_str()));
        assert_eq!(ids.len(), 4, "the send and three batch items: {ids:?}");
        assert!(ids.contains(&id.as_str()));

        // A scheduled send moved, then canceled.
        let scheduled = out["scheduled"]["data"]["id"].as_str().expect("scheduled id");
        assert_eq!(out["update"]["data"], serde_json::json!({"object": "email", "id": scheduled}), "{}", out["update"]);
        assert_eq!(out["cancel"]["data"], serde_json::json!({"object": "email", "id": scheduled}), "{}", out["cancel"]);
        assert_eq!(out["canceled"]["data"]["last_event"], "canceled");

        // The errors an SDK user handles, in Resend's names.
        for (case, status, name) in
            [("badKey", 403, "invalid_api_key"), ("invalid", 422, "validation_error"), ("notFound", 404, "not_found")]
        {
            let error = &out[case]["error"];
            assert_eq!(
                (error["statusCode"].as_u64(), error["name"].as_str()),
                (Some(status), Some(name)),
                "{case}: {}",
                out[case]
            );
            assert_eq!(out[case]["data"], Value::Null);
        }
    });
}

#[test]
fn the_resend_python_sdk_sends_reads_and_raises_as_its_users_expect() {
    let test = "the_resend_python_sdk_sends_reads_and_raises_as_its_users_expect";
    let mut probe = Command::new("python3");
    probe.args(["-c", "import resend, sys; sys.exit(resend.__version__ != '2.51.0')"]);
    if !tidings_e2e::tool_available(test, &mut probe, "pip install resend==2.51.0") {
        return;
    }
    block_on(async {
        let s = Setup::start().await;
        let output = s
            .driver("python3", "resend-python/drive.py")
            .env("RESEND_BASE_URL", s.server.url("/resend"))
            .env("REQUESTS_CA_BUNDLE", s.server.cert_path())
            .output()
            .await
            .expect("python3 runs");
        let out = printed(&output, "drive.py");

        let id = out["send"]["data"]["id"].as_str().unwrap_or_else(|| panic!("a send: {}", out["send"])).to_owned();
        assert_eq!(out["retry"]["data"]["id"], id.as_str(), "the same Idempotency-Key, the same email");
        let got = &out["get"]["data"];
        assert_eq!((got["object"].as_str(), got["last_event"].as_str()), (Some("email"), Some("delivered")), "{got}");
        assert_eq!(got["cc"], serde_json::json!(["carol@z.example"]));
        let copies = s.delivered_copies(got["message_id"].as_str().expect("the Message-ID")).await;
        assert_eq!(attachments(&copies[0].data), [("list.txt".to_owned(), b"list of bytes\n".to_vec())]);
        assert_eq!(out["batch"]["data"]["data"].as_array().map(Vec::len), Some(2), "{}", out["batch"]);
        let listed = out["list"]["data"]["data"].as_array().unwrap_or_else(|| panic!("a list: {}", out["list"]));
        assert_eq!(listed.len(), 3, "the send and two batch items");

        // The exceptions a Python user catches.
        for (case, code, class) in [
            ("badKey", 403, "InvalidApiKeyError"),
            ("invalid", 422, "ValidationError"),
            ("notFound", 404, "ResendError"),
        ] {
            let error = &out[case]["error"];
            assert_eq!(
                (error["code"].as_u64(), error["class"].as_str()),
                (Some(code), Some(class)),
                "{case}: {}",
                out[case]
            );
        }
    });
}
