//! The server as an operator meets it: start-up, TLS, bootstrap keys, restarts, the
//! operator commands, configuration errors and shutdown.

use std::process::Command;

use serde_json::json;
use tidings_e2e::{DataDir, Options, TestServer, fresh_key, server_binary};

#[tokio::test]
async fn it_answers_over_https_with_the_configured_bootstrap_key() {
    let server = TestServer::start().await;

    let (status, body) = server.get("/v1/keys", server.key()).await;

    assert_eq!(status, 200, "{body}");
    assert_eq!(body["success"], true);
    assert_eq!(body["data"][0]["scope"], "full");
    assert_eq!(body["data"][0]["prefix"], &server.key()[..12]);
    assert!(server.stdout_lines().is_empty(), "a configured key is not printed: {:?}", server.stdout_lines());
    let logged = server.wait_for_log(&["method=GET", "path=/v1/keys", "status=200", "latency_ms="]);
    assert!(logged.is_some(), "one log line per request:\n{}", server.stderr_lines().join("\n"));
}

#[tokio::test]
async fn unknown_routes_get_the_404_envelope() {
    let server = TestServer::start().await;

    let (status, body) = server.get("/v1/nothing-here", server.key()).await;

    assert_eq!(status, 404);
    assert_eq!(body["success"], false);
    assert_eq!(body["error"]["code"], "not_found");
}

#[tokio::test]
async fn plain_http_and_garbage_do_not_hurt_it() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let server = TestServer::start().await;

    let mut plain = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    plain.write_all(b"GET /v1/keys HTTP/1.1\r\nHost: x\r\n\r\n").await.unwrap();
    let mut answer = String::new();
    plain.read_to_string(&mut answer).await.unwrap();
    let mut garbage = tokio::net::TcpStream::connect(server.addr()).await.unwrap();
    garbage.write_all(&[0x16, 0x03, 0x01, 0xff, 0xff, 0, 1, 2, 3]).await.unwrap();
    let mut rest = Vec::new();
    let _ = garbage.read_to_end(&mut rest).await;
    // A client that connects and says nothing must not block the others.
    let _silent = tokio::net::TcpStream::connect(server.addr()).await.unwrap();

    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("https_required"), "{answer}");
    let (status, _) = server.get("/v1/keys", server.key()).await;
    assert_eq!(status, 200);
}

#[tokio::test]
async fn a_generated_bootstrap_key_is_printed_once_and_survives_restarts() {
    let server = TestServer::start_with(Options::default()).await;
    let key = server.key().to_owned();
    assert_eq!(server.stdout_lines(), vec![format!("bootstrap key: {key}")]);
    let (status, _) = server.get("/v1/keys", &key).await;
    assert_eq!(status, 200);
    let (status, created) = server.post("/v1/keys", &key, json!({ "name": "ci" })).await;
    assert_eq!(status, 201, "{created}");

    let (exit, data_dir) = server.stop().await;
    assert!(exit.success(), "{exit}");
    let restarted = TestServer::start_with(Options { data_dir: Some(data_dir), ..Options::default() }).await;

    assert!(restarted.stdout_lines().is_empty(), "no new key on restart: {:?}", restarted.stdout_lines());
    let (status, body) = restarted.get("/v1/keys", &key).await;
    assert_eq!(status, 200);
    assert_eq!(body["data"].as_array().unwrap().len(), 2, "both keys kept: {body}");
}

#[tokio::test]
async fn sigterm_stops_it_cleanly() {
    let server = TestServer::start().await;
    let (status, _) = server.get("/v1/keys", server.key()).await;
    assert_eq!(status, 200);

    let (exit, _) = server.stop().await;

    assert_eq!(exit.code(), Some(0));
}

#[tokio::test]
async fn revoking_a_key_takes_effect_on_the_next_request() {
    let server = TestServer::start().await;
    let (_, created) = server.post("/v1/keys", server.key(), json!({ "name": "doomed" })).await;
    let doomed = created["data"]["plaintextKey"].as_str().expect("plaintextKey").to_owned();
    let id = created["data"]["id"].as_str().unwrap();
    assert_eq!(server.get("/v1/keys", &doomed).await.0, 200);

    let (status, body) = server.delete(&format!("/v1/keys/{id}"), server.key()).await;
    assert_eq!(status, 200, "{body}");

    let (status, body) = server.get("/v1/keys", &doomed).await;
    assert_eq!(status, 401);
    assert_eq!(body["error"]["code"], "invalid_api_key");
}

#[tokio::test]
async fn workspace_create_prints_a_key_isolated_from_the_default_workspace() {
    let data_dir = DataDir::new();
    let bootstrap = fresh_key();
    let first = TestServer::start_with(Options {
        data_dir: Some(data_dir.clone()),
        bootstrap_key: Some(bootstrap.clone()),
        ..Options::default()
    })
    .await;
    let (_, created) = first.post("/v1/keys", &bootstrap, json!({ "name": "default-only" })).await;
    let default_key_id = created["data"]["id"].as_str().unwrap().to_owned();
    first.stop().await;

    let output = data_dir.run_cli(&["workspace", "create", "acme"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let stdout = String::from_utf8(output.stdout).unwrap();
    let line = |prefix: &str| stdout.lines().find_map(|l| l.strip_prefix(prefix)).map(str::to_owned);
    let workspace = line("workspace: ").expect("workspace id printed");
    let acme_key = line("key: ").expect("key printed");
    let output = data_dir.run_cli(&["key", "create", "--workspace", &workspace, "--name", "sender", "--scope", "send"]);
    assert!(output.status.success(), "{}", String::from_utf8_lossy(&output.stderr));
    let send_key =
        String::from_utf8(output.stdout).unwrap().lines().find_map(|l| l.strip_prefix("key: ")).unwrap().to_owned();
    let unknown = data_dir.run_cli(&["key", "create", "--workspace", "01ARZ3NDEKTSV4RRFFQ69G5FAV"]);
    assert_eq!(unknown.status.code(), Some(1));

    let server = TestServer::start_with(Options { data_dir: Some(data_dir), ..Options::default() }).await;
    let (status, body) = server.get("/v1/keys", &acme_key).await;
    assert_eq!(status, 200, "{body}");
    let names: Vec<&str> = body["data"].as_array().unwrap().iter().map(|k| k["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["sender", "default"], "only acme's keys");
    let (status, _) = server.get(&format!("/v1/keys/{default_key_id}"), &acme_key).await;
    assert_eq!(status, 404, "another workspace's key is not found");
    let (status, body) = server.get("/v1/keys", &send_key).await;
    assert_eq!((status, body["error"]["code"].as_str()), (403, Some("insufficient_scope")));
    assert_eq!(server.get("/v1/keys", &bootstrap).await.0, 200, "the default workspace still works");
}

#[test]
fn a_bad_setting_exits_non_zero_naming_the_variable() {
    let data_dir = DataDir::new();
    let cases: [&[(&str, &str)]; 5] = [
        &[("TIDINGS_LISTEN", "127.0.0.1")],
        &[("TIDINGS_BOOTSTRAP_KEY", "tid_tooshort")],
        &[("TIDINGS_IDEMPOTENCY_WINDOW", "forever")],
        &[("TIDINGS_TLS_CERT", "/nonexistent/cert.pem"), ("TIDINGS_TLS_KEY", "/nonexistent/key.pem")],
        &[("TIDINGS_DATABASE_URL", "mysql://localhost/tidings")],
    ];
    for vars in cases {
        let (var, _) = vars[0];
        let output = Command::new(server_binary())
            .env_clear()
            .env("TIDINGS_DATA_DIR", data_dir.path())
            .env("TIDINGS_DNS_SERVER", "127.0.0.1:53")
            .envs(vars.iter().copied())
            .output()
            .unwrap();

        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{var}: {stderr}");
        assert!(stderr.contains(var), "{var}: {stderr}");
        assert!(!stderr.contains("listening on"), "{var}: {stderr}");
    }
}

#[tokio::test]
async fn the_probes_answer_without_a_key_and_every_response_carries_a_request_id() {
    let server = TestServer::start().await;

    let health = server.request(reqwest::Method::GET, "/healthz").send().await.unwrap();
    let ready =
        server.request(reqwest::Method::GET, "/readyz").header("x-request-id", "lb-probe-7").send().await.unwrap();
    let missing_key =
        server.request(reqwest::Method::GET, "/v1/keys").header("x-request-id", "req-401").send().await.unwrap();

    let generated = health.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert_eq!(generated.len(), 26, "a ULID: {generated}");
    assert_eq!(ready.headers()["x-request-id"], "lb-probe-7", "a client's id is echoed");
    assert_eq!(missing_key.headers()["x-request-id"], "req-401", "errors carry it too");
    let (status, body) = tidings_e2e::into_parts(health).await;
    assert_eq!((status, &body["data"]["status"]), (200, &json!("ok")), "{body}");
    let (status, body) = tidings_e2e::into_parts(ready).await;
    assert_eq!((status, &body["data"]["status"]), (200, &json!("ok")), "{body}");
    let (status, body) = tidings_e2e::into_parts(missing_key).await;
    assert_eq!((status, &body["error"]["code"]), (401, &json!("missing_api_key")), "{body}");
    let logged = server.wait_for_log(&["path=/v1/keys", "status=401", "request_id=req-401"]);
    assert!(logged.is_some(), "the request's log line names its id:\n{}", server.stderr_lines().join("\n"));
    assert!(server.wait_for_log(&["path=/healthz", &format!("request_id={generated}")]).is_some());
}
