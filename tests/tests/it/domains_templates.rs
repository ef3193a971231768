//! `/v1/domains` (with senders and tracking) and `/v1/templates` (with versions and render)
//! against the real binary, domain checks answered by a DNS server on loopback
//! (docs/api.md#domains, #templates and #tracking).

use crate::common::{
    assert_error, assert_invalid, assert_ok, field_of_items, ids, publish, server_relaying_to, server_with_dns,
    verified_domain, walk_pages, walk_pages_by,
};
use reqwest::Method;
use serde_json::{Value, json};
use tidings_e2e::into_parts;

/// A ULID that names nothing in any store.
const UNKNOWN_ID: &str = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

/// The record of `domain` (a domain's `data`) whose purpose is `purpose`.
fn record<'a>(domain: &'a Value, purpose: &str) -> &'a Value {
    domain["dnsRecords"]
        .as_array()
        .expect("dnsRecords")
        .iter()
        .find(|r| r["purpose"] == purpose)
        .unwrap_or_else(|| panic!("no {purpose} record: {domain}"))
}

/// The four statuses of a domain's `data`: SPF, DKIM, DKIM2, DMARC.
fn statuses(domain: &Value) -> [&str; 4] {
    ["spfStatus", "dkimStatus", "dkim2Status", "dmarcStatus"].map(|f| domain[f].as_str().expect(f))
}

#[tokio::test]
async fn domains_are_added_checked_verified_and_deleted() {
    let (server, dns) = server_with_dns(&[]).await;
    let key = server.key().to_owned();

    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "shop.example"})).await;
    assert_ok(status, &body, 201, "add a domain");
    let added = body["data"].clone();
    let id = added["id"].as_str().unwrap().to_owned();
    assert_eq!(added["domain"], "shop.example", "{added}");
    assert_eq!(added["overallStatus"], "Pending", "{added}");
    assert_eq!(statuses(&added), ["Pending"; 4], "{added}");
    assert!(added["verifiedAt"].is_null(), "{added}");
    assert_eq!((&added["openTracking"], &added["clickTracking"]), (&json!(false), &json!(false)), "{added}");
    let mut purposes: Vec<&str> =
        added["dnsRecords"].as_array().unwrap().iter().map(|r| r["purpose"].as_str().unwrap()).collect();
    purposes.sort_unstable();
    assert_eq!(purposes, ["DKIM (TXT)", "DKIM2 (TXT)", "DMARC (TXT)", "SPF (TXT)"], "{added}");
    for r in added["dnsRecords"].as_array().unwrap() {
        assert_eq!(r["type"], "TXT", "{r}");
        assert!(r["ttl"].as_u64().is_some_and(|t| t > 0), "{r}");
        assert_eq!((&r["status"], &r["lastCheckedAt"]), (&json!("Pending"), &Value::Null), "{r}");
        let name = r["name"].as_str().unwrap();
        assert!(name.ends_with("shop.example") && !name.ends_with('.'), "fully qualified, no trailing dot: {r}");
    }
    assert_eq!(record(&added, "SPF (TXT)")["name"], "shop.example");
    assert!(record(&added, "SPF (TXT)")["value"].as_str().unwrap().starts_with("v=spf1"), "{added}");
    assert_eq!(record(&added, "DMARC (TXT)")["name"], "_dmarc.shop.example");
    assert!(record(&added, "DMARC (TXT)")["value"].as_str().unwrap().starts_with("v=DMARC1"), "{added}");
    for dkim in ["DKIM (TXT)", "DKIM2 (TXT)"] {
        let r = record(&added, dkim);
        assert!(r["name"].as_str().unwrap().ends_with("._domainkey.shop.example"), "{r}");
        assert!(r["value"].as_str().unwrap().contains("p="), "{r}");
    }
    assert!(record(&added, "DKIM2 (TXT)")["value"].as_str().unwrap().contains("k=ed25519"), "{added}");
    assert_ne!(record(&added, "DKIM (TXT)")["name"], record(&added, "DKIM2 (TXT)")["name"], "two selectors");

    for again in ["shop.example", "SHOP.Example", "shop.example."] {
        let (status, body) = server.post("/v1/domains", &key, json!({"domain": again})).await;
        assert_error(status, &body, 409, "conflict", &format!("adding {again:?} again"));
    }
    for request in [json!({}), json!({"domain": "not a domain"}), json!({"domain": "localhost"}), json!({"domain": 5})]
    {
        let (status, body) = server.post("/v1/domains", &key, request.clone()).await;
        assert_invalid(status, &body, &["domain"], &format!("POST /v1/domains {request}"));
    }

    // Nothing published: every record Failed, with the reason readable (no body needed).
    let verify = format!("/v1/domains/{id}/verify");
    let (status, body) =
        into_parts(server.request(Method::POST, &verify).bearer_auth(&key).send().await.unwrap()).await;
    assert_ok(status, &body, 200, "verify with nothing published");
    assert_eq!(body["data"]["overallStatus"], "Failed", "{body}");
    assert_eq!(statuses(&body["data"]), ["Failed"; 4], "{body}");
    for r in body["data"]["dnsRecords"].as_array().unwrap() {
        assert_eq!(r["status"], "Failed", "{r}");
        assert!(r["error"].as_str().is_some_and(|e| !e.is_empty()), "the reason is readable: {r}");
        assert!(r["lastCheckedAt"].is_string(), "{r}");
    }
    assert!(body["data"]["verifiedAt"].is_null(), "{body}");
    let (status, body) = server.post(&format!("/v1/domains/{id}/senders"), &key, json!({"username": "billing"})).await;
    assert_error(status, &body, 422, "domain_not_verified", "a sender on an unverified domain");

    // SPF (among other mechanisms, as real SPF records have) plus a DKIM record holding
    // another key: partly verified, the DKIM error readable.
    let spf = record(&added, "SPF (TXT)")["value"].as_str().unwrap();
    let spf = spf.replacen("v=spf1 ", "v=spf1 include:_spf.other.example mx ", 1);
    dns.set_txt("shop.example", &[&spf]).await;
    let rsa_name = record(&added, "DKIM (TXT)")["name"].as_str().unwrap();
    dns.set_txt(rsa_name, &["v=DKIM1; k=rsa; p=MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEAwrong"]).await;
    let (status, body) = server.post(&verify, &key, json!({})).await;
    assert_ok(status, &body, 200, "verify with SPF only");
    assert_eq!(body["data"]["overallStatus"], "PartiallyVerified", "{body}");
    assert_eq!(statuses(&body["data"]), ["Verified", "Failed", "Failed", "Failed"], "{body}");
    let dkim = record(&body["data"], "DKIM (TXT)");
    assert!(dkim["error"].as_str().is_some_and(|e| !e.is_empty()), "{dkim}");
    assert!(record(&body["data"], "SPF (TXT)")["error"].is_null(), "{body}");

    // SPF, DKIM and DKIM2 make it Verified; DMARC is only recommended.
    publish(&dns, &added, &["DKIM"]).await;
    let (status, body) = server.post(&verify, &key, json!({})).await;
    assert_ok(status, &body, 200, "verify with SPF, DKIM and DKIM2");
    assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
    assert_eq!(statuses(&body["data"]), ["Verified", "Verified", "Verified", "Failed"], "{body}");
    let verified_at = body["data"]["verifiedAt"].clone();
    assert!(verified_at.is_string(), "{body}");
    let (status, got) = server.get(&format!("/v1/domains/{id}"), &key).await;
    assert_ok(status, &got, 200, "get the domain");
    assert_eq!(got["data"], body["data"], "GET shows the verification outcome");
    publish(&dns, &added, &["DMARC"]).await;
    let (_, body) = server.post(&verify, &key, json!({})).await;
    assert_eq!(statuses(&body["data"]), ["Verified"; 4], "{body}");
    assert_eq!(body["data"]["verifiedAt"], verified_at, "verifiedAt is when it first became Verified");

    // Tracking settings.
    let path = format!("/v1/domains/{id}");
    let (status, body) = server.patch(&path, &key, json!({"openTracking": true})).await;
    assert_ok(status, &body, 200, "turn on open tracking");
    assert_eq!((&body["data"]["openTracking"], &body["data"]["clickTracking"]), (&json!(true), &json!(false)));
    let (status, body) = server.patch(&path, &key, json!({"clickTracking": true})).await;
    assert_ok(status, &body, 200, "turn on click tracking");
    assert_eq!((&body["data"]["openTracking"], &body["data"]["clickTracking"]), (&json!(true), &json!(true)));
    let (status, body) = server.patch(&path, &key, json!({})).await;
    assert_ok(status, &body, 200, "an empty PATCH");
    assert_eq!(body["data"]["overallStatus"], "Verified", "a PATCH leaves verification alone: {body}");
    let (_, body) = server.get(&path, &key).await;
    assert_eq!((&body["data"]["openTracking"], &body["data"]["clickTracking"]), (&json!(true), &json!(true)));
    let (status, body) = server.patch(&path, &key, json!({"openTracking": "yes"})).await;
    assert_invalid(status, &body, &["openTracking"], "a tracking flag that is not a boolean");

    // Senders.
    let senders = format!("/v1/domains/{id}/senders");
    let (status, body) =
        server.post(&senders, &key, json!({"username": "billing", "displayName": "Shop Billing"})).await;
    assert_ok(status, &body, 201, "add a sender");
    assert_eq!(body["data"]["username"], "billing", "{body}");
    assert_eq!(body["data"]["displayName"], "Shop Billing", "{body}");
    assert_eq!(body["data"]["address"], "billing@shop.example", "{body}");
    let (status, body) = server.post(&senders, &key, json!({"username": "support"})).await;
    assert_ok(status, &body, 201, "add a sender without a display name");
    assert!(body["data"]["displayName"].is_null(), "{body}");
    let (status, body) = server.post(&senders, &key, json!({"username": "Billing"})).await;
    assert_error(status, &body, 409, "conflict", "the same username again (case-insensitive)");
    for (request, field) in [
        (json!({}), "username"),
        (json!({"username": "two words"}), "username"),
        (json!({"username": "a@b"}), "username"),
        (json!({"username": "ok", "displayName": "Evil\r\nBcc: x@example.com"}), "displayName"),
    ] {
        let (status, body) = server.post(&senders, &key, request.clone()).await;
        assert_invalid(status, &body, &[field], &format!("POST senders {request}"));
    }
    let (status, body) = server.get(&senders, &key).await;
    assert_ok(status, &body, 200, "list senders");
    assert_eq!(field_of_items(&body, "username"), ["support", "billing"], "newest first: {body}");
    assert_eq!(walk_pages_by(&server, &key, &senders, 1, "username").await, ["support", "billing"]);
    for (query, field) in [("limit=0", "limit"), ("limit=201", "limit"), ("cursor=billing", "cursor")] {
        let (status, body) = server.get(&format!("{senders}?{query}"), &key).await;
        assert_invalid(status, &body, &[field], &format!("senders?{query}"));
    }
    let (status, body) = server.delete(&format!("{senders}/billing"), &key).await;
    assert_ok(status, &body, 200, "remove a sender");
    assert!(body["data"].is_null(), "{body}");
    let (status, body) = server.delete(&format!("{senders}/billing"), &key).await;
    assert_error(status, &body, 404, "not_found", "remove it again");
    let (_, body) = server.get(&senders, &key).await;
    assert_eq!(field_of_items(&body, "username"), ["support"], "{body}");

    // Listing, and 404s for ids that name nothing.
    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "second.example"})).await;
    assert_ok(status, &body, 201, "add a second domain");
    let second = body["data"]["id"].as_str().unwrap().to_owned();
    let (status, body) = server.get("/v1/domains", &key).await;
    assert_ok(status, &body, 200, "list domains");
    // With the default outbox the workspace's sandbox sending domain is listed too: this
    // first list made it, so it is the newest (tests/tests/it/sandbox.rs).
    let sandbox = body["data"][0]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["data"][0]["sandbox"], true, "{body}");
    assert_eq!(ids(&body), [sandbox.clone(), second.clone(), id.clone()], "newest first: {body}");
    assert_eq!(walk_pages(&server, &key, "/v1/domains", 1).await, [sandbox, second, id.clone()]);
    for missing in [UNKNOWN_ID, "not-a-ulid"] {
        for (method, path, body) in [
            (Method::GET, format!("/v1/domains/{missing}"), None),
            (Method::PATCH, format!("/v1/domains/{missing}"), Some(json!({"openTracking": true}))),
            (Method::POST, format!("/v1/domains/{missing}/verify"), None),
            (Method::DELETE, format!("/v1/domains/{missing}"), None),
            (Method::GET, format!("/v1/domains/{missing}/senders"), None),
            (Method::POST, format!("/v1/domains/{missing}/senders"), Some(json!({"username": "x"}))),
            (Method::DELETE, format!("/v1/domains/{missing}/senders/support"), None),
        ] {
            let what = format!("{method} {path}");
            let (status, body) = into_parts(server.call(method, &path, &key, body).await).await;
            assert_error(status, &body, 404, "not_found", &what);
        }
    }

    // Delete: gone with its senders; sends from it are refused; re-adding gives new records.
    let (status, body) = server.delete(&path, &key).await;
    assert_ok(status, &body, 200, "delete the domain");
    assert!(body["data"].is_null(), "{body}");
    let (status, body) = server.get(&path, &key).await;
    assert_error(status, &body, 404, "not_found", "get a deleted domain");
    let (status, body) = server.delete(&path, &key).await;
    assert_error(status, &body, 404, "not_found", "delete it again");
    let (status, body) = server.get(&senders, &key).await;
    assert_error(status, &body, 404, "not_found", "the senders of a deleted domain");
    let send = json!({"to": "ann@example.com", "from": "support@shop.example", "subject": "s", "text": "t"});
    let (status, body) = server.post("/v1/messages", &key, send).await;
    assert_error(status, &body, 422, "domain_not_verified", "sending from a deleted domain");
    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "shop.example"})).await;
    assert_ok(status, &body, 201, "add the domain again");
    assert_eq!(body["data"]["overallStatus"], "Pending", "{body}");
    for dkim in ["DKIM (TXT)", "DKIM2 (TXT)"] {
        assert_ne!(record(&body["data"], dkim)["name"], record(&added, dkim)["name"], "a fresh selector for {dkim}");
        assert_ne!(record(&body["data"], dkim)["value"], record(&added, dkim)["value"], "a fresh key for {dkim}");
    }
}

#[tokio::test]
async fn templates_are_versioned_rendered_and_deleted() {
    let (server, dns) = server_with_dns(&[]).await;
    let key = server.key().to_owned();
    verified_domain(&server, &dns, &key, "tpl.example").await;

    let create =
        json!({"name": "receipt", "subject": "Receipt {{order}}", "html": "<p>{{name}}</p>", "text": "Hi {{name}}"});
    let (status, body) = server.post("/v1/templates", &key, create).await;
    assert_ok(status, &body, 201, "create a template");
    let created = body["data"].clone();
    let id = created["id"].as_str().unwrap().to_owned();
    let v1 = created["currentVersionId"].as_str().unwrap().to_owned();
    assert_eq!(created["name"], "receipt", "{created}");
    assert!(created["createdAt"].is_string(), "{created}");
    let versions = created["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1, "{created}");
    assert_eq!(versions[0]["id"], v1.as_str(), "{created}");
    assert_eq!(versions[0]["versionNo"], 1, "{created}");
    assert_eq!(versions[0]["subject"], "Receipt {{order}}", "{created}");
    assert_eq!(versions[0]["html"], "<p>{{name}}</p>", "{created}");
    assert_eq!(versions[0]["text"], "Hi {{name}}", "{created}");
    assert!(versions[0]["createdAt"].is_string(), "{created}");

    for (request, fields) in [
        (json!({}), &["name", "subject"][..]),
        (json!({"name": "x"}), &["subject"]),
        (json!({"name": "x", "subject": "a\nb"}), &["subject"]),
        (json!({"name": "", "subject": "s"}), &["name"]),
        (json!({"name": "n".repeat(201), "subject": "s"}), &["name"]),
        (json!({"name": "x", "subject": 5}), &["subject"]),
    ] {
        let (status, body) = server.post("/v1/templates", &key, request.clone()).await;
        assert_invalid(status, &body, fields, &format!("POST /v1/templates {request}"));
    }
    for (what, request) in [
        ("an unclosed expression", json!({"name": "bad", "subject": "s", "html": "<p>\n  {{name\n</p>"})),
        ("an unclosed block", json!({"name": "bad", "subject": "s", "text": "line one\n{{#if x}}open"})),
        ("an unknown helper", json!({"name": "bad", "subject": "s", "text": "a\nb {{shout name}}"})),
        ("a broken subject", json!({"name": "bad", "subject": "Hi {{"})),
    ] {
        let (status, body) = server.post("/v1/templates", &key, request).await;
        assert_error(status, &body, 422, "template_syntax_error", what);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(message.contains("line ") && message.contains("column "), "{what}: names line and column: {body}");
    }
    let (status, body) =
        server.post("/v1/templates", &key, json!({"name": "bad", "subject": "s", "html": "x\n{{name"})).await;
    assert_error(status, &body, 422, "template_syntax_error", "an error on line 2");
    assert!(body["error"]["message"].as_str().unwrap().contains("line 2"), "{body}");

    let (status, body) = server.get(&format!("/v1/templates/{id}"), &key).await;
    assert_ok(status, &body, 200, "get the template");
    assert_eq!(body["data"], created, "GET shows what creation returned");

    // Versions: the next number, current unless told otherwise.
    let versions_path = format!("/v1/templates/{id}/versions");
    let (status, body) =
        server.post(&versions_path, &key, json!({"subject": "Receipt #{{order}}", "text": "v2 {{name}}"})).await;
    assert_ok(status, &body, 201, "add version 2");
    let v2 = body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["data"]["versionNo"], 2, "{body}");
    assert!(body["data"]["html"].is_null(), "a version is a whole snapshot: {body}");
    assert_eq!(body["data"]["text"], "v2 {{name}}", "{body}");
    let (status, body) = server.post(&versions_path, &key, json!({"subject": "Draft", "makeCurrent": false})).await;
    assert_ok(status, &body, 201, "add version 3, not current");
    assert_eq!(body["data"]["versionNo"], 3, "{body}");
    let (_, body) = server.get(&format!("/v1/templates/{id}"), &key).await;
    assert_eq!(body["data"]["currentVersionId"], v2.as_str(), "version 2 is current: {body}");
    let numbers: Vec<&Value> = body["data"]["versions"].as_array().unwrap().iter().map(|v| &v["versionNo"]).collect();
    assert_eq!(numbers, [1, 2, 3], "all versions, oldest first: {body}");
    let (status, body) = server.post(&versions_path, &key, json!({"text": "no subject"})).await;
    assert_invalid(status, &body, &["subject"], "a version without a subject");
    let (status, body) = server.post(&versions_path, &key, json!({"subject": "s", "html": "{{#if x}}unclosed"})).await;
    assert_error(status, &body, 422, "template_syntax_error", "a version that does not compile");

    // PATCH: rename, switch the current version back.
    let (status, other) =
        server.post("/v1/templates", &key, json!({"name": "raw", "subject": "S", "html": "{{{raw}}} {{raw}}"})).await;
    assert_ok(status, &other, 201, "create a second template");
    let other_id = other["data"]["id"].as_str().unwrap().to_owned();
    let other_version = other["data"]["currentVersionId"].as_str().unwrap().to_owned();
    let path = format!("/v1/templates/{id}");
    let (status, body) = server.patch(&path, &key, json!({"currentVersionId": v1})).await;
    assert_ok(status, &body, 200, "make version 1 current again");
    assert_eq!(body["data"]["currentVersionId"], v1.as_str(), "{body}");
    let (status, body) = server.patch(&path, &key, json!({"name": "receipt-v"})).await;
    assert_ok(status, &body, 200, "rename");
    assert_eq!((&body["data"]["name"], &body["data"]["currentVersionId"]), (&json!("receipt-v"), &json!(v1)));
    for (request, field) in [
        (json!({"currentVersionId": other_version}), "currentVersionId"),
        (json!({"currentVersionId": UNKNOWN_ID}), "currentVersionId"),
        (json!({"name": ""}), "name"),
    ] {
        let (status, body) = server.patch(&path, &key, request.clone()).await;
        assert_invalid(status, &body, &[field], &format!("PATCH template {request}"));
    }

    // Render: html-escaped in html only; a pinned version; what is missing is named.
    let render = format!("/v1/templates/{id}/render");
    let variables = json!({"order": "<42>", "name": "<Ann>"});
    let (status, body) = server.post(&render, &key, json!({"variables": variables})).await;
    assert_ok(status, &body, 200, "render the current version");
    assert_eq!(body["data"], json!({"subject": "Receipt <42>", "html": "<p>&lt;Ann&gt;</p>", "text": "Hi <Ann>"}));
    let (status, body) = server.post(&render, &key, json!({"variables": variables, "versionId": v2})).await;
    assert_ok(status, &body, 200, "render version 2");
    assert_eq!(body["data"], json!({"subject": "Receipt #<42>", "html": null, "text": "v2 <Ann>"}));
    let (status, body) =
        server.post(&format!("/v1/templates/{other_id}/render"), &key, json!({"variables": {"raw": "<b>"}})).await;
    assert_ok(status, &body, 200, "render triple braces");
    assert_eq!(body["data"]["html"], "<b> &lt;b&gt;", "{{{{{{raw}}}}}} is not escaped: {body}");
    let (status, body) = server.post(&render, &key, json!({"variables": {"order": 1}})).await;
    assert_error(status, &body, 422, "template_render_error", "a missing variable");
    assert!(body["error"]["message"].as_str().unwrap().contains("name"), "names the variable: {body}");
    for (request, field) in [
        (json!({"variables": "order=1"}), "variables"),
        (json!({"variables": {}, "versionId": UNKNOWN_ID}), "versionId"),
        (json!({"variables": {}, "versionId": other_version}), "versionId"),
    ] {
        let (status, body) = server.post(&render, &key, request.clone()).await;
        assert_invalid(status, &body, &[field], &format!("render {request}"));
    }

    // Listing.
    let (status, body) = server.get("/v1/templates", &key).await;
    assert_ok(status, &body, 200, "list templates");
    assert_eq!(ids(&body), [other_id.clone(), id.clone()], "newest first: {body}");
    assert_eq!(body["data"][1]["versions"].as_array().unwrap().len(), 3, "with their versions: {body}");
    assert_eq!(walk_pages(&server, &key, "/v1/templates", 1).await, [other_id, id.clone()]);

    // Delete: gone, but a message sent from it keeps its version.
    let (status, body) = server
        .post("/v1/messages", &key, json!({"to": "ann@example.com", "templateId": id, "variables": variables}))
        .await;
    assert_ok(status, &body, 201, "send from the template");
    let message = body["data"]["id"].as_str().unwrap().to_owned();
    assert_eq!(body["data"]["templateVersionId"], v1.as_str(), "{body}");
    let (status, body) = server.delete(&path, &key).await;
    assert_ok(status, &body, 200, "delete the template");
    assert!(body["data"].is_null(), "{body}");
    let (_, body) = server.get(&format!("/v1/messages/{message}"), &key).await;
    assert_eq!(body["data"]["templateVersionId"], v1.as_str(), "the message keeps its version: {body}");
    let (status, body) = server.post("/v1/messages", &key, json!({"to": "ann@example.com", "templateId": id})).await;
    assert_invalid(status, &body, &["templateId"], "sending from a deleted template");
    for missing in [id.as_str(), UNKNOWN_ID, "not-a-ulid"] {
        for (method, path, body) in [
            (Method::GET, format!("/v1/templates/{missing}"), None),
            (Method::PATCH, format!("/v1/templates/{missing}"), Some(json!({"name": "x"}))),
            (Method::DELETE, format!("/v1/templates/{missing}"), None),
            (Method::POST, format!("/v1/templates/{missing}/versions"), Some(json!({"subject": "s"}))),
            (Method::POST, format!("/v1/templates/{missing}/render"), Some(json!({}))),
        ] {
            let what = format!("{method} {path}");
            let (status, body) = into_parts(server.call(method, &path, &key, body).await).await;
            assert_error(status, &body, 404, "not_found", &what);
        }
    }
}

/// What the server logs at start, and every domain's SPF record says, when it delivers by
/// relay or MX with `TIDINGS_SPF_INCLUDE` unset.
const SPF_WARNING: &str = "TIDINGS_SPF_INCLUDE is not set on this Tidings server";

#[tokio::test]
async fn relay_delivery_without_an_spf_term_warns_in_the_log_and_on_the_spf_record() {
    let sink = tidings_transport_smtp::testing::SmtpSink::start().await.expect("the SMTP sink starts");
    let (server, dns) = server_relaying_to(&sink, &[]).await;
    let key = server.key().to_owned();
    let logged = server.wait_for_log(&[SPF_WARNING]).expect("a warning naming TIDINGS_SPF_INCLUDE at start");
    assert!(logged.contains("WARN") && logged.contains("ip4:127.0.0.1"), "{logged}");

    let (status, body) = server.post("/v1/domains", &key, json!({"domain": "warned.example"})).await;
    assert_ok(status, &body, 201, "add a domain");
    let added = body["data"].clone();
    let spf = record(&added, "SPF (TXT)");
    assert_eq!(spf["value"], "v=spf1 ip4:127.0.0.1 ~all", "{added}");
    let warning = spf["warning"].as_str().unwrap_or_else(|| panic!("the SPF record carries the warning: {added}"));
    assert!(warning.starts_with(SPF_WARNING) && warning.contains("TIDINGS_DELIVERY=relay"), "{warning}");
    for purpose in ["DKIM (TXT)", "DKIM2 (TXT)", "DMARC (TXT)"] {
        assert!(record(&added, purpose)["warning"].is_null(), "{purpose}: {added}");
    }

    // Published exactly as asked, the domain verifies; the SPF record still says the warning.
    let id = added["id"].as_str().unwrap().to_owned();
    publish(&dns, &added, &["SPF", "DKIM", "DMARC"]).await;
    let (status, body) = server.post(&format!("/v1/domains/{id}/verify"), &key, json!({})).await;
    assert_ok(status, &body, 200, "verify");
    assert_eq!(body["data"]["overallStatus"], "Verified", "{body}");
    let (status, body) = server.get(&format!("/v1/domains/{id}"), &key).await;
    assert_ok(status, &body, 200, "GET the domain");
    let domain = &body["data"];
    assert_eq!(domain["spfStatus"], "Verified", "{domain}");
    let spf = record(domain, "SPF (TXT)");
    assert_eq!((&spf["status"], &spf["error"]), (&json!("Verified"), &Value::Null), "{domain}");
    assert_eq!(spf["warning"], warning, "GET shows the same warning: {domain}");
}

#[tokio::test]
async fn there_is_no_spf_warning_with_the_outbox_or_with_the_term_set() {
    let sink = tidings_transport_smtp::testing::SmtpSink::start().await.expect("the SMTP sink starts");
    let relay = format!("smtp://{}", sink.addr());
    let configured = [
        ("TIDINGS_DELIVERY", "relay"),
        ("TIDINGS_SMTP_RELAY", relay.as_str()),
        ("TIDINGS_SPF_INCLUDE", "include:_spf.relay.example"),
    ];
    for (env, spf_value) in
        [(&[][..], "v=spf1 ip4:127.0.0.1 ~all"), (&configured[..], "v=spf1 include:_spf.relay.example ~all")]
    {
        let (server, dns) = server_with_dns(env).await;
        let key = server.key().to_owned();
        let id = verified_domain(&server, &dns, &key, "quiet.example").await;
        let (status, body) = server.get(&format!("/v1/domains/{id}"), &key).await;
        assert_ok(status, &body, 200, "GET the domain");
        let spf = record(&body["data"], "SPF (TXT)");
        assert_eq!(spf["value"], spf_value, "{env:?}");
        assert!(spf["warning"].is_null(), "{env:?}: no warning: {body}");
        // The warning is logged before the listening line, so it would be there by now.
        let lines = server.stderr_lines();
        assert!(!lines.iter().any(|l| l.contains("TIDINGS_SPF_INCLUDE")), "{env:?}: nothing logged: {lines:?}");
    }
}
