//! A workspace with one of everything, for the tests that walk every route: the ids each
//! route's path needs, plausible form fields for each POST, every string that identifies
//! something in it (to prove none reaches another workspace), and a fingerprint of
//! everything stored (to prove a refused POST changed nothing).

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::fmt::Write as _;

use tidings_core::ids::{ApiKeyId, DomainId};
use tidings_core::ports::{MessageQuery, PageRequest, Store};
use tidings_core::usecases::{
    AddSenderRequest, AddSuppressionRequest, CreateApiKeyRequest, CreateTemplateRequest, CreateWebhookRequest,
    Principal, RouteRequest, SendRequest, Tidings,
};

use crate::support::store_inbound;

/// Who sends or signs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// No session cookie.
    NoSession,
    /// A session whose key was revoked after signing in.
    Revoked,
    /// The full key of another workspace, on this workspace's ids.
    OtherWorkspace,
    /// A `send` key.
    Send,
    /// A `send` key restricted to the workspace's domain.
    ScopedSend,
    /// A `full` key.
    Full,
}

/// One workspace's things.
pub struct World {
    /// Names carry it.
    pub tag: String,
    /// Its full key and who it is.
    pub full: String,
    pub principal: Principal,
    pub send: String,
    pub scoped: String,
    /// A key revoked after its session was made (the test makes the session).
    pub revoked: (String, ApiKeyId),
    /// A key only there to be revoked by the routes.
    pub victim_key: String,
    pub domain: String,
    pub domain_name: String,
    pub sender: String,
    pub template: String,
    pub version: String,
    pub webhook: String,
    pub delivery: String,
    pub suppressed: String,
    /// A message received for the domain, with one attachment.
    pub inbound: String,
    /// An inbound route of the domain.
    pub route: String,
    /// The queued message each sending kind sent.
    pub messages: BTreeMap<Kind, String>,
    /// Strings that identify this workspace's things.
    pub markers: Vec<String>,
}

impl World {
    /// Fills the workspace of `full` (whose principal is `principal`); `verify` makes and
    /// verifies its domain (the caller's DNS).
    pub async fn build(core: &Tidings, principal: Principal, full: String, tag: &str, domain: String) -> Self {
        let who = &principal;
        let domain_name = core.domains().get(who, DomainId::parse_or_none(&domain)).await.unwrap().name.to_string();
        let sender = format!("{tag}-billing");
        core.senders()
            .add(
                who,
                DomainId::parse_or_none(&domain),
                AddSenderRequest { username: Some(sender.clone()), display_name: None },
            )
            .await
            .unwrap();
        let template_name = format!("{tag}-template");
        let template = core
            .templates()
            .create(
                who,
                CreateTemplateRequest {
                    name: Some(template_name.clone()),
                    subject: Some(format!("{tag} subject {{{{x}}}}")),
                    html: None,
                    text: Some("t".into()),
                },
            )
            .await
            .unwrap();
        let hook_url = format!("https://hooks.example.com/{tag}-hook");
        let webhook = core
            .webhooks()
            .create(
                who,
                CreateWebhookRequest {
                    url: Some(hook_url.clone()),
                    event_types: Some(vec!["Delivered".into()]),
                    enabled: Some(true),
                    format: None,
                },
            )
            .await
            .unwrap();
        let delivery = core.webhooks().test(who, webhook.id).await.unwrap();
        let suppressed = format!("{tag}-suppressed@example.com");
        core.suppressions().add(who, AddSuppressionRequest { email: Some(suppressed.clone()) }).await.unwrap();

        let key = |name: String, scope: &str, domain: Option<String>| CreateApiKeyRequest {
            name: Some(name),
            scope: Some(scope.into()),
            sending_domain_id: domain,
            rate_limit_per_sec: Some(1000),
        };
        let send = core.keys().create(who, key(format!("{tag}-send"), "send", None)).await.unwrap();
        let scoped = core.keys().create(who, key(format!("{tag}-scoped"), "send", Some(domain.clone()))).await.unwrap();
        let revoked = core.keys().create(who, key(format!("{tag}-revoked"), "full", None)).await.unwrap();
        let victim = core.keys().create(who, key(format!("{tag}-victim"), "full", None)).await.unwrap();

        let recipient = format!("{tag}-rcpt@example.com");
        let subject = format!("{tag}-message-subject");
        let mut messages = BTreeMap::new();
        for (kind, plaintext) in [
            (Kind::Full, full.clone()),
            (Kind::Send, send.plaintext.expose().to_owned()),
            (Kind::ScopedSend, scoped.plaintext.expose().to_owned()),
        ] {
            let sender_who = core.authenticate(&plaintext).await.unwrap();
            let req = SendRequest {
                to: Some(recipient.clone().into()),
                subject: Some(subject.clone()),
                text: Some("t".into()),
                html: Some("<p>h</p>".into()),
                ..SendRequest::default()
            };
            let sent = core.messages().send(&sender_who, req, None).await.unwrap();
            messages.insert(kind, sent.message.id.to_string());
        }
        let inbound_subject = format!("{tag}-inbound-subject");
        let raw = format!(
            "From: Ann <ann@sender.example>\r\nTo: help@{domain_name}\r\nSubject: {inbound_subject}\r\n\
             MIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\n\
             Content-Type: text/plain\r\n\r\nHi\r\n--b\r\nContent-Type: text/csv; name={tag}.csv\r\n\
             Content-Disposition: attachment; filename={tag}.csv\r\n\r\na,b\r\n--b--\r\n"
        );
        let inbound =
            store_inbound(core, who.workspace_id, raw.as_bytes(), &format!("help@{domain_name}"), |_| {}).await;
        let route_match = format!("{tag}-route@{domain_name}");
        let route = RouteRequest { matcher: Some(route_match.clone()), action: Some("store".into()), webhook_id: None };
        let route = core.inbound_routes().create(who, route).await.unwrap();

        let mut markers = vec![domain.clone(), domain_name.clone(), sender.clone(), template.id.to_string()];
        markers.extend([template_name, webhook.id.to_string(), hook_url, delivery.id.to_string(), suppressed.clone()]);
        markers.extend([recipient, subject, format!("{tag}-send"), format!("{tag}-scoped"), format!("{tag}-victim")]);
        markers.extend([send.key.id.to_string(), scoped.key.id.to_string(), victim.key.id.to_string()]);
        markers.extend(messages.values().cloned());
        markers.extend([inbound.id.to_string(), inbound_subject, route.id.to_string(), route_match]);
        Self {
            tag: tag.to_owned(),
            full,
            principal,
            send: send.plaintext.expose().to_owned(),
            scoped: scoped.plaintext.expose().to_owned(),
            revoked: (revoked.plaintext.expose().to_owned(), revoked.key.id),
            victim_key: victim.key.id.to_string(),
            domain,
            domain_name,
            sender,
            version: template.current_version_id.to_string(),
            template: template.id.to_string(),
            webhook: webhook.id.to_string(),
            delivery: delivery.id.to_string(),
            suppressed,
            inbound: inbound.id.to_string(),
            route: route.id.to_string(),
            messages,
            markers,
        }
    }

    /// `path` with its parameters filled from this world; `message` for `/messages/{id}…`.
    pub fn fill(&self, path: &str, message: &str) -> String {
        let family = path.split('/').nth(1).unwrap_or("");
        let id = match family {
            "keys" => self.victim_key.as_str(),
            "domains" => &self.domain,
            "templates" => &self.template,
            "webhooks" => &self.webhook,
            "messages" => message,
            "inbound" if path.starts_with("/inbound/routes/") => &self.route,
            "inbound" => &self.inbound,
            _ => "",
        };
        let mut filled = String::new();
        for segment in path.split('/').skip(1) {
            let value = match segment {
                "{id}" if !id.is_empty() => id,
                "{delivery_id}" => &self.delivery,
                "{username}" => &self.sender,
                "{email}" => &self.suppressed,
                "{n}" => "0",
                s if s.starts_with('{') => {
                    panic!("{path}: the parameter {s} is unknown to this test; say in `fill` what it takes")
                }
                s => s,
            };
            filled.push('/');
            filled.push_str(value);
        }
        if filled.is_empty() { "/".to_owned() } else { filled }
    }

    /// Form fields a POST to `path` (the route's template) would carry to succeed.
    pub fn fields(&self, path: &str, n: usize) -> Vec<(String, String)> {
        let pairs: Vec<(&str, String)> = match path {
            "/messages" => vec![("to", format!("form{n}@example.com")), ("subject", "s".into()), ("text", "t".into())],
            "/messages/{id}/reschedule" => vec![("send_at", String::new())],
            "/domains" => vec![("name", format!("{}-new{n}.example", self.tag))],
            "/domains/{id}/tracking" => vec![("open", "on".into())],
            "/domains/{id}/inbound" => vec![("inbound", "on".into())],
            "/inbound/routes" => vec![("match", format!("new{n}@{}", self.domain_name)), ("action", "store".into())],
            "/domains/{id}/senders" => vec![("username", format!("new{n}"))],
            "/templates" => vec![("name", format!("t{n}")), ("subject", "s".into()), ("text", "t".into())],
            "/templates/{id}/versions" => {
                vec![("subject", "s2".into()), ("text", "t2".into()), ("make_current", "on".into())]
            }
            "/templates/{id}/current" => vec![("version_id", self.version.clone())],
            "/templates/{id}/preview" => vec![("variables", r#"{"x": "1"}"#.into())],
            "/templates/{id}/preview-draft" => {
                vec![("subject", "draft {{x}}".into()), ("text", "t".into()), ("variables", r#"{"x": "1"}"#.into())]
            }
            "/templates/{id}/send" => {
                vec![("to", format!("template{n}@example.com")), ("variables", r#"{"x": "1"}"#.into())]
            }
            "/webhooks/{id}/edit" => {
                vec![("url", format!("https://hooks.example.com/edited{n}")), ("event_types", "Delivered".into())]
            }
            // The confirmation step (`crate::confirm` in the dashboard) answered yes.
            p if p.ends_with("/delete") || p.ends_with("/revoke") || p.ends_with("/cancel") => {
                vec![("confirm", "yes".into())]
            }
            "/suppressions" => vec![("email", format!("new{n}@example.com"))],
            "/webhooks" => {
                vec![("url", format!("https://hooks.example.com/new{n}")), ("event_types", "Bounced".into())]
            }
            "/keys" => vec![("name", format!("k{n}")), ("scope", "send".into())],
            "/keys/{id}/rate" => vec![("rate_limit_per_sec", "20".into())],
            _ => Vec::new(),
        };
        pairs.into_iter().map(|(k, v)| (k.to_owned(), v)).collect()
    }
}

/// Everything stored in `core`'s workspace of `who`, as text: two equal fingerprints mean
/// nothing changed.
pub async fn fingerprint(store: &dyn Store, who: &Principal) -> String {
    let ws = who.workspace_id;
    let mut out = String::new();
    let messages = store.list_messages(ws, &MessageQuery::page(PageRequest::first(200))).await.unwrap();
    for m in &messages.items {
        let _ = writeln!(out, "message {} {:?} {:?} {:?}", m.id, m.status, m.next_attempt_at, m.last_event_id);
    }
    for d in store.list_domains(ws, PageRequest::first(200)).await.unwrap().items {
        let _ = writeln!(
            out,
            "domain {} {:?} {} {} {} {}",
            d.id,
            d.status,
            d.open_tracking,
            d.click_tracking,
            d.inbound,
            d.records.len()
        );
        for s in store.list_senders(ws, d.id, PageRequest::first(200)).await.unwrap().items {
            let _ = writeln!(out, "  sender {}", s.username);
        }
    }
    for t in store.list_templates(ws, PageRequest::first(200)).await.unwrap().items {
        let _ = writeln!(out, "template {} {} {} {}", t.id, t.name, t.current_version_id, t.versions.len());
    }
    for s in store.list_suppressions(ws, None, PageRequest::first(200)).await.unwrap().items {
        let _ = writeln!(out, "suppression {}", s.email);
    }
    for w in store.list_webhooks(ws, PageRequest::first(200)).await.unwrap().items {
        let _ = writeln!(out, "webhook {} {} {}", w.id, w.enabled, w.secret.expose());
        for d in store.list_webhook_deliveries(ws, w.id, PageRequest::first(200)).await.unwrap().items {
            let _ = writeln!(out, "  delivery {} {:?} {:?}", d.id, d.status, d.next_attempt_at);
        }
    }
    for r in store.list_inbound_routes(ws).await.unwrap() {
        let _ = writeln!(out, "inbound route {} {} {:?}", r.id, r.matcher, r.action);
    }
    for k in store.list_api_keys(ws, PageRequest::first(200)).await.unwrap().items {
        let _ = writeln!(out, "key {} {}", k.id, k.name);
    }
    out
}
