//! Domains, their senders, and templates through the API (docs/api.md#domains and #templates): status codes,
//! the envelope, scopes and workspace isolation.

use crate::support::TestApi;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use serde_json::{Value, json};
use tidings_core::ids::DomainId;
use tidings_core::model::DomainStatus;

/// The `id` of a resource in `data`.
fn id_of(data: &Value) -> String {
    data["id"].as_str().unwrap_or_else(|| panic!("no id: {data}")).to_owned()
}

/// Adds `name` with the bootstrap key and returns `data`, asserting the 201.
async fn add_domain(api: &TestApi, name: &str) -> Value {
    let r = api.post("/v1/domains", json!({ "domain": name })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.data().clone()
}

/// Creates a template with the bootstrap key and returns `data`, asserting the 201.
async fn add_template(api: &TestApi, body: Value) -> Value {
    let r = api.post("/v1/templates", body).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    r.data().clone()
}

/// No DNS server answers in these tests: the domain is marked Verified in the store.
async fn mark_verified(api: &TestApi, domain_id: &str) {
    let who = api.core.authenticate(&api.key).await.unwrap();
    let mut domain = api.core.domains().get(&who, DomainId::parse_or_none(domain_id)).await.unwrap();
    domain.status = DomainStatus::Verified;
    domain.verified_at = Some(domain.created_at);
    api.core.store().update_domain(&domain).await.unwrap();
}

/// A `send`-scoped key of the default workspace.
async fn send_key(api: &TestApi) -> String {
    let r = api.post("/v1/keys", json!({ "scope": "send" })).await;
    r.data()["plaintextKey"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn an_added_domain_is_pending_with_the_four_records_to_publish() {
    let api = TestApi::new().await;
    let d = add_domain(&api, "example.com").await;

    assert_eq!(id_of(&d).len(), 26);
    assert_eq!(d["domain"], "example.com");
    for field in ["overallStatus", "spfStatus", "dkimStatus", "dkim2Status", "dmarcStatus"] {
        assert_eq!(d[field], "Pending", "{field}");
    }
    assert!(d["verifiedAt"].is_null());
    assert_eq!((&d["openTracking"], &d["clickTracking"]), (&json!(false), &json!(false)));
    assert!(d["createdAt"].is_string());

    let records = d["dnsRecords"].as_array().unwrap();
    let purposes: Vec<&str> = records.iter().map(|r| r["purpose"].as_str().unwrap()).collect();
    assert_eq!(purposes, ["SPF (TXT)", "DKIM (TXT)", "DKIM2 (TXT)", "DMARC (TXT)"]);
    for r in records {
        assert_eq!(r["type"], "TXT");
        assert_eq!(r["status"], "Pending");
        assert!(r["ttl"].as_u64().unwrap() > 0);
        assert!(r["lastCheckedAt"].is_null() && r["error"].is_null());
        assert!(!r["name"].as_str().unwrap().ends_with('.'));
    }
    assert_eq!(records[0]["name"], "example.com");
    assert!(records[0]["value"].as_str().unwrap().starts_with("v=spf1 "));
    for dkim in &records[1..3] {
        assert!(dkim["name"].as_str().unwrap().ends_with("._domainkey.example.com"), "{dkim}");
        assert!(dkim["value"].as_str().unwrap().starts_with("v=DKIM1;"));
    }
    assert_ne!(records[1]["name"], records[2]["name"]);
    assert!(records[1]["value"].as_str().unwrap().contains("k=rsa"));
    assert!(records[2]["value"].as_str().unwrap().contains("k=ed25519"));
    assert_eq!(records[3]["name"], "_dmarc.example.com");
    assert!(records[3]["value"].as_str().unwrap().starts_with("v=DMARC1"));
}

#[tokio::test]
async fn adding_a_domain_twice_is_a_conflict_and_a_bad_name_is_a_validation_error() {
    let api = TestApi::new().await;
    add_domain(&api, "example.com").await;

    let r = api.post("/v1/domains", json!({ "domain": "example.com" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::CONFLICT, "conflict"));

    for body in [json!({ "domain": "not a domain" }), json!({}), json!({ "domain": 7 })] {
        let r = api.post("/v1/domains", body.clone()).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"), "{body}");
        assert_eq!(r.body["error"]["details"][0]["field"], "domain", "{body}");
    }
}

#[tokio::test]
async fn domains_are_listed_newest_first_read_and_gone_after_delete() {
    let api = TestApi::new().await;
    let a = add_domain(&api, "one.example").await;
    let b = add_domain(&api, "two.example").await;
    // Ids order by creation time only to the millisecond: "newest" is the larger id.
    let (first, second) = if id_of(&a) < id_of(&b) { (a, b) } else { (b, a) };

    let page = api.get("/v1/domains?limit=1").await;
    assert_eq!(page.status, StatusCode::OK);
    assert_eq!(page.data().as_array().unwrap().len(), 1);
    assert_eq!(page.data()[0]["id"], second["id"]);
    assert_eq!(page.body["pagination"], json!({ "limit": 1, "hasMore": true, "nextCursor": second["id"] }));
    let next = api.get(&format!("/v1/domains?limit=1&cursor={}", id_of(&second))).await;
    assert_eq!(next.data()[0]["id"], first["id"]);
    assert_eq!(next.body["pagination"]["hasMore"], false);
    assert!(next.body["pagination"]["nextCursor"].is_null());
    let r = api.get("/v1/domains?limit=201").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));

    let path = format!("/v1/domains/{}", id_of(&first));
    let r = api.get(&path).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data(), &first);

    let r = api.call("DELETE", &path, Some(&api.key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    for (method, p) in [("GET", path.clone()), ("DELETE", path.clone()), ("POST", format!("{path}/verify"))] {
        let r = api.call(method, &p, Some(&api.key), None).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{method} {p}");
    }
    let r = api.get("/v1/domains/not-a-ulid").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));

    // Re-adding after delete gives a new domain with fresh DKIM records.
    let again = add_domain(&api, first["domain"].as_str().unwrap()).await;
    assert_ne!(again["id"], first["id"]);
    assert_ne!(again["dnsRecords"][1]["name"], first["dnsRecords"][1]["name"]);
}

#[tokio::test]
async fn verifying_a_domain_whose_records_are_missing_is_a_failed_outcome_not_an_error() {
    let api = TestApi::new().await;
    let d = add_domain(&api, "example.com").await;

    let r = api.call("POST", &format!("/v1/domains/{}/verify", id_of(&d)), Some(&api.key), None).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let checked = r.data();
    assert_eq!(checked["overallStatus"], "Failed");
    assert_eq!((&checked["spfStatus"], &checked["dkimStatus"]), (&json!("Failed"), &json!("Failed")));
    assert!(checked["verifiedAt"].is_null());
    for record in checked["dnsRecords"].as_array().unwrap() {
        assert_eq!(record["status"], "Failed", "{record}");
        assert!(record["lastCheckedAt"].is_string(), "{record}");
        assert!(record["error"].as_str().is_some_and(|e| !e.is_empty()), "{record}");
    }
    let r = api.get(&format!("/v1/domains/{}", id_of(&d))).await;
    assert_eq!(r.data()["overallStatus"], "Failed");
}

#[tokio::test]
async fn tracking_is_switched_per_domain_with_patch() {
    let api = TestApi::new().await;
    let d = add_domain(&api, "example.com").await;
    let path = format!("/v1/domains/{}", id_of(&d));

    let r = api.call("PATCH", &path, Some(&api.key), Some(json!({ "openTracking": true }))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!((&r.data()["openTracking"], &r.data()["clickTracking"]), (&json!(true), &json!(false)));
    let r = api.call("PATCH", &path, Some(&api.key), Some(json!({ "clickTracking": true }))).await;
    assert_eq!((&r.data()["openTracking"], &r.data()["clickTracking"]), (&json!(true), &json!(true)));

    let r = api.call("PATCH", &path, Some(&api.key), Some(json!({ "openTracking": "yes" }))).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "openTracking");
}

#[tokio::test]
async fn senders_register_only_on_a_verified_domain() {
    let api = TestApi::new().await;
    let d = add_domain(&api, "example.com").await;
    let senders = format!("/v1/domains/{}/senders", id_of(&d));

    let r = api.post(&senders, json!({ "username": "billing", "displayName": "Billing" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "domain_not_verified"));

    mark_verified(&api, &id_of(&d)).await;
    let r = api.post(&senders, json!({ "username": "billing", "displayName": "Billing" })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let sender = r.data().clone();
    assert_eq!(sender["username"], "billing");
    assert_eq!(sender["displayName"], "Billing");
    assert_eq!(sender["address"], "billing@example.com");
    assert!(sender["createdAt"].is_string());

    let r = api.post(&senders, json!({ "username": "BILLING" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::CONFLICT, "conflict"));
    let r = api.post(&senders, json!({ "username": "bad name" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "username");

    let r = api.post(&senders, json!({ "username": "support" })).await;
    assert_eq!(r.status, StatusCode::CREATED);
    assert!(r.data()["displayName"].is_null());
    let listed = api.get(&format!("{senders}?limit=1")).await;
    assert_eq!(listed.status, StatusCode::OK);
    assert_eq!(listed.data().as_array().unwrap().len(), 1);
    assert_eq!(listed.body["pagination"]["hasMore"], true);
    let next =
        api.get(&format!("{senders}?cursor={}", listed.body["pagination"]["nextCursor"].as_str().unwrap())).await;
    let mut names = vec![listed.data()[0]["username"].clone(), next.data()[0]["username"].clone()];
    names.sort_by_key(|n| n.to_string());
    assert_eq!(names, [json!("billing"), json!("support")]);

    let r = api.call("DELETE", &format!("{senders}/billing"), Some(&api.key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    let r = api.call("DELETE", &format!("{senders}/billing"), Some(&api.key), None).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"));
    assert_eq!(api.get(&senders).await.data().as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn a_send_key_may_not_manage_domains_or_templates() {
    let api = TestApi::new().await;
    let d = id_of(&add_domain(&api, "example.com").await);
    let t = id_of(&add_template(&api, json!({ "name": "welcome", "subject": "Hi" })).await);
    let key = send_key(&api).await;

    let calls = [
        ("POST", "/v1/domains".to_owned(), Some(json!({ "domain": "other.example" }))),
        ("GET", "/v1/domains".to_owned(), None),
        ("GET", format!("/v1/domains/{d}"), None),
        ("PATCH", format!("/v1/domains/{d}"), Some(json!({ "openTracking": true }))),
        ("POST", format!("/v1/domains/{d}/verify"), None),
        ("DELETE", format!("/v1/domains/{d}"), None),
        ("POST", format!("/v1/domains/{d}/senders"), Some(json!({ "username": "x" }))),
        ("GET", format!("/v1/domains/{d}/senders"), None),
        ("DELETE", format!("/v1/domains/{d}/senders/x"), None),
        ("POST", "/v1/templates".to_owned(), Some(json!({ "name": "n", "subject": "s" }))),
        ("GET", "/v1/templates".to_owned(), None),
        ("GET", format!("/v1/templates/{t}"), None),
        ("PATCH", format!("/v1/templates/{t}"), Some(json!({ "name": "n" }))),
        ("DELETE", format!("/v1/templates/{t}"), None),
        ("POST", format!("/v1/templates/{t}/versions"), Some(json!({ "subject": "s" }))),
        ("POST", format!("/v1/templates/{t}/render"), Some(json!({}))),
    ];
    for (method, path, body) in calls {
        let r = api.call(method, &path, Some(&key), body).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::FORBIDDEN, "insufficient_scope"), "{method} {path}");
    }
    // Nothing was changed.
    assert_eq!(api.get(&format!("/v1/domains/{d}")).await.status, StatusCode::OK);
    assert_eq!(api.get(&format!("/v1/templates/{t}")).await.status, StatusCode::OK);
}

#[tokio::test]
async fn another_workspaces_domains_and_templates_are_not_found() {
    let api = TestApi::new().await;
    let d = id_of(&add_domain(&api, "example.com").await);
    let t = id_of(&add_template(&api, json!({ "name": "welcome", "subject": "Hi" })).await);
    let (_, created) = api.core.workspaces().create("other", None).await.unwrap();
    let other = created.plaintext.expose().to_owned();

    let calls = [
        ("GET", format!("/v1/domains/{d}"), None),
        ("PATCH", format!("/v1/domains/{d}"), Some(json!({ "openTracking": true }))),
        ("POST", format!("/v1/domains/{d}/verify"), None),
        ("GET", format!("/v1/domains/{d}/senders"), None),
        ("POST", format!("/v1/domains/{d}/senders"), Some(json!({ "username": "x" }))),
        ("DELETE", format!("/v1/domains/{d}"), None),
        ("GET", format!("/v1/templates/{t}"), None),
        ("PATCH", format!("/v1/templates/{t}"), Some(json!({ "name": "mine" }))),
        ("POST", format!("/v1/templates/{t}/versions"), Some(json!({ "subject": "s" }))),
        ("POST", format!("/v1/templates/{t}/render"), Some(json!({}))),
        ("DELETE", format!("/v1/templates/{t}"), None),
    ];
    for (method, path, body) in calls {
        let r = api.call(method, &path, Some(&other), body).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{method} {path}");
    }
    let r = api.call("GET", "/v1/domains", Some(&other), None).await;
    assert_eq!(r.data(), &json!([]));
    let r = api.call("GET", "/v1/templates", Some(&other), None).await;
    assert_eq!(r.data(), &json!([]));
    // The other workspace may add the same name: domains are unique per workspace.
    let r = api.call("POST", "/v1/domains", Some(&other), Some(json!({ "domain": "example.com" }))).await;
    assert_eq!(r.status, StatusCode::CREATED);
}

#[tokio::test]
async fn a_created_template_has_version_one_current() {
    let api = TestApi::new().await;
    let body =
        json!({ "name": "welcome", "subject": "Hi {{ name }}", "html": "<p>{{ name }}</p>", "text": "{{ name }}" });
    let t = add_template(&api, body).await;

    assert_eq!(id_of(&t).len(), 26);
    assert_eq!(t["name"], "welcome");
    assert!(t["createdAt"].is_string());
    let versions = t["versions"].as_array().unwrap();
    assert_eq!(versions.len(), 1);
    let v = &versions[0];
    assert_eq!(t["currentVersionId"], v["id"]);
    assert_eq!(v["versionNo"], 1);
    assert_eq!(v["subject"], "Hi {{ name }}");
    assert_eq!(v["html"], "<p>{{ name }}</p>");
    assert_eq!(v["text"], "{{ name }}");
    assert!(v["createdAt"].is_string());

    let r = api.get(&format!("/v1/templates/{}", id_of(&t))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!(r.data(), &t);
}

#[tokio::test]
async fn a_template_that_does_not_compile_is_a_syntax_error_naming_line_and_column() {
    let api = TestApi::new().await;
    let r = api.post("/v1/templates", json!({ "name": "broken", "subject": "Hi", "html": "<p>\n{{#if x}}open" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "template_syntax_error"));
    let message = r.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("line") && message.contains("column"), "{message}");

    let r = api.post("/v1/templates", json!({ "subject": "" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    let fields: Vec<&Value> = r.body["error"]["details"].as_array().unwrap().iter().map(|d| &d["field"]).collect();
    assert_eq!(fields, [&json!("name"), &json!("subject")]);
    assert_eq!(api.get("/v1/templates").await.data(), &json!([]));
}

#[tokio::test]
async fn versions_are_added_and_the_current_one_is_switched_with_patch() {
    let api = TestApi::new().await;
    let t = add_template(&api, json!({ "name": "welcome", "subject": "v1" })).await;
    let path = format!("/v1/templates/{}", id_of(&t));
    let v1 = t["currentVersionId"].clone();

    let r = api.post(&format!("{path}/versions"), json!({ "subject": "v2", "text": "two" })).await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
    let v2 = r.data().clone();
    assert_eq!((&v2["versionNo"], &v2["subject"], &v2["text"]), (&json!(2), &json!("v2"), &json!("two")));
    assert!(v2["html"].is_null());
    let got = api.get(&path).await;
    assert_eq!(got.data()["currentVersionId"], v2["id"]);
    assert_eq!(got.data()["versions"].as_array().unwrap().len(), 2);

    let r = api.post(&format!("{path}/versions"), json!({ "subject": "v3", "makeCurrent": false })).await;
    assert_eq!(r.data()["versionNo"], 3);
    assert_eq!(api.get(&path).await.data()["currentVersionId"], v2["id"]);
    let r = api.post(&format!("{path}/versions"), json!({ "subject": "{{#each}}" })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "template_syntax_error"));

    let r = api.call("PATCH", &path, Some(&api.key), Some(json!({ "currentVersionId": v1, "name": "hello" }))).await;
    assert_eq!(r.status, StatusCode::OK);
    assert_eq!((&r.data()["currentVersionId"], &r.data()["name"]), (&v1, &json!("hello")));

    let foreign = add_template(&api, json!({ "name": "other", "subject": "s" })).await;
    let r = api
        .call("PATCH", &path, Some(&api.key), Some(json!({ "currentVersionId": foreign["currentVersionId"] })))
        .await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "currentVersionId");
}

#[tokio::test]
async fn rendering_escapes_html_but_not_text_and_names_a_missing_variable() {
    let api = TestApi::new().await;
    let body = json!({
        "name": "welcome",
        "subject": "Hi {{ name }}",
        "html": "<p>{{ name }}</p>",
        "text": "Hello {{ name }}",
    });
    let t = add_template(&api, body).await;
    let render = format!("/v1/templates/{}/render", id_of(&t));

    let r = api.post(&render, json!({ "variables": { "name": "Ann & <Bo>" } })).await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(
        r.data(),
        &json!({ "subject": "Hi Ann & <Bo>", "html": "<p>Ann &amp; &lt;Bo&gt;</p>", "text": "Hello Ann & <Bo>" })
    );

    let r = api.post(&render, json!({ "variables": {} })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "template_render_error"));
    assert!(r.body["error"]["message"].as_str().unwrap().contains("name"), "{}", r.body);

    // An older version renders when named.
    let r = api.post(&format!("/v1/templates/{}/versions", id_of(&t)), json!({ "subject": "New {{ name }}" })).await;
    assert_eq!(r.status, StatusCode::CREATED);
    let r = api.post(&render, json!({ "variables": { "name": "Ann" } })).await;
    assert_eq!(r.data(), &json!({ "subject": "New Ann", "html": null, "text": null }));
    let r = api.post(&render, json!({ "variables": { "name": "Ann" }, "versionId": t["currentVersionId"] })).await;
    assert_eq!(r.data()["subject"], "Hi Ann");

    let r = api.post(&render, json!({ "variables": ["name"] })).await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "variables");
}

#[tokio::test]
async fn a_deleted_template_is_not_found() {
    let api = TestApi::new().await;
    let t = add_template(&api, json!({ "name": "welcome", "subject": "Hi" })).await;
    let path = format!("/v1/templates/{}", id_of(&t));

    let r = api.call("DELETE", &path, Some(&api.key), None).await;
    assert_eq!(r.status, StatusCode::OK);
    assert!(r.data().is_null());
    let calls = [
        ("GET", path.clone(), None),
        ("DELETE", path.clone(), None),
        ("PATCH", path.clone(), Some(json!({ "name": "x" }))),
        ("POST", format!("{path}/versions"), Some(json!({ "subject": "s" }))),
        ("POST", format!("{path}/render"), Some(json!({}))),
        ("GET", "/v1/templates/not-a-ulid".to_owned(), None),
    ];
    for (method, p, body) in calls {
        let r = api.call(method, &p, Some(&api.key), body).await;
        assert_eq!((r.status, r.error_code()), (StatusCode::NOT_FOUND, "not_found"), "{method} {p}");
    }
}

#[tokio::test]
async fn templates_are_listed_newest_first_with_their_versions_page_by_page() {
    let api = TestApi::new().await;
    let mut ids = Vec::new();
    for name in ["a", "b", "c"] {
        ids.push(id_of(&add_template(&api, json!({ "name": name, "subject": name })).await));
    }
    // Ids order by creation time only to the millisecond: newest first is ascending ids reversed.
    ids.sort();

    let first = api.get("/v1/templates?limit=2").await;
    assert_eq!(first.status, StatusCode::OK);
    let page: Vec<&Value> = first.data().as_array().unwrap().iter().map(|t| &t["id"]).collect();
    assert_eq!(page, [&json!(ids[2]), &json!(ids[1])]);
    assert_eq!(first.data()[0]["versions"][0]["versionNo"], 1);
    assert_eq!(first.body["pagination"], json!({ "limit": 2, "hasMore": true, "nextCursor": ids[1] }));

    let second = api.get(&format!("/v1/templates?limit=2&cursor={}", ids[1])).await;
    assert_eq!(second.data().as_array().unwrap().len(), 1);
    assert_eq!(second.data()[0]["id"], ids[0].as_str());
    assert_eq!(second.body["pagination"]["hasMore"], false);

    let r = api.get("/v1/templates?limit=0").await;
    assert_eq!((r.status, r.error_code()), (StatusCode::UNPROCESSABLE_ENTITY, "validation_error"));
    assert_eq!(r.body["error"]["details"][0]["field"], "limit");
}

#[tokio::test]
async fn malformed_json_bodies_are_400() {
    let api = TestApi::new().await;
    let d = id_of(&add_domain(&api, "example.com").await);
    let t = id_of(&add_template(&api, json!({ "name": "welcome", "subject": "Hi" })).await);

    let targets = [
        ("POST", "/v1/domains".to_owned()),
        ("PATCH", format!("/v1/domains/{d}")),
        ("POST", format!("/v1/domains/{d}/senders")),
        ("POST", "/v1/templates".to_owned()),
        ("PATCH", format!("/v1/templates/{t}")),
        ("POST", format!("/v1/templates/{t}/versions")),
        ("POST", format!("/v1/templates/{t}/render")),
    ];
    for (method, path) in targets {
        for body in ["{\"name\":", "[]", "\"text\""] {
            let req = Request::builder()
                .method(method)
                .uri(&path)
                .header("authorization", format!("Bearer {}", api.key))
                .header("content-type", "application/json")
                .body(Body::from(body))
                .unwrap();
            let r = api.send(req).await;
            assert_eq!((r.status, r.error_code()), (StatusCode::BAD_REQUEST, "invalid_json"), "{method} {path} {body}");
        }
    }
}
