//! The page shell every page shares (head, navigation, sign-out form, `main#content` with
//! the page's `h1`), and small pieces the pages reuse.

use chrono::{DateTime, Utc};
use maud::{DOCTYPE, Markup, html};

use crate::session::Viewer;

/// The navigation: path and label.
const NAV: [(&str, &str); 8] = [
    ("/overview", "Overview"),
    ("/messages", "Messages"),
    ("/inbound", "Inbound"),
    ("/domains", "Domains"),
    ("/templates", "Templates"),
    ("/suppressions", "Suppressions"),
    ("/webhooks", "Webhooks"),
    ("/keys", "API keys"),
];

/// Whose header a page has.
pub(crate) enum Nav<'a> {
    /// Nobody signed in: the brand only.
    None,
    /// A workspace session of `scope` (`full`, `send`) whose CSRF token is `csrf`: the
    /// navigation and its sign-out.
    Workspace { scope: &'a str, csrf: &'a str },
    /// The operator's pages: signed in (with the session's CSRF token), their own link and
    /// the operator's sign-out.
    Operator { csrf: Option<&'a str> },
}

/// A whole page titled `title` (also its `h1`), with the navigation when someone is signed
/// in.
pub(crate) fn page(viewer: Option<&Viewer>, title: &str, body: Markup) -> Markup {
    match viewer {
        Some(v) => shell(Nav::Workspace { scope: v.scope_word(), csrf: v.csrf() }, title, body),
        None => shell(Nav::None, title, body),
    }
}

/// [`page`] with the navigation of a session of `scope` whose CSRF token is `csrf`.
pub(crate) fn page_with_nav(scope: &str, csrf: &str, title: &str, body: Markup) -> Markup {
    shell(Nav::Workspace { scope, csrf }, title, body)
}

/// A page of the operator's (`/operator/…`), with the operator's sign-out when `csrf` (the
/// operator session's token) is given. No workspace navigation: the operator session opens
/// no workspace page.
pub(crate) fn operator_page(csrf: Option<&str>, title: &str, body: Markup) -> Markup {
    shell(Nav::Operator { csrf }, title, body)
}

fn shell(nav: Nav<'_>, title: &str, body: Markup) -> Markup {
    let home = match nav {
        Nav::None => "/",
        Nav::Workspace { .. } => "/overview",
        Nav::Operator { .. } => "/operator/sites",
    };
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                meta name="referrer" content="no-referrer";
                title { (title) " · Tidings" }
                link rel="icon" href=(crate::assets::FAVICON_SVG_PATH) type="image/svg+xml";
                link rel="stylesheet" href=(crate::assets::CSS_PATH);
                script src=(crate::assets::JS_PATH) defer {}
            }
            body {
                a.skip href="#content" { "Skip to content" }
                header.top {
                    a.brand href=(home) { "Tidings" }
                    @match nav {
                        Nav::None => {}
                        Nav::Workspace { scope, csrf } => {
                            nav #nav aria-label="Main" {
                                ul {
                                    @for (path, label) in NAV {
                                        li { a href=(path) { (label) } }
                                    }
                                }
                            }
                            div.who {
                                span.scope title="The scope of the API key this session signed in with" {
                                    (scope) " key"
                                }
                                form #sign-out method="post" action="/sign-out" {
                                    input type="hidden" name="csrf" value=(csrf);
                                    button type="submit" { "Sign out" }
                                }
                            }
                        }
                        Nav::Operator { csrf } => {
                            @if let Some(csrf) = csrf {
                                nav #operator-nav aria-label="Operator" {
                                    ul { li { a href="/operator/sites" { "Delivery sites" } } }
                                }
                                div.who {
                                    span.scope title="Signed in with the server's operator token" { "operator" }
                                    form #operator-sign-out method="post" action="/operator/sign-out" {
                                        input type="hidden" name="csrf" value=(csrf);
                                        button type="submit" { "Sign out" }
                                    }
                                }
                            }
                        }
                    }
                }
                main #content {
                    h1 { (title) }
                    (body)
                }
            }
        }
    }
}

/// The hidden CSRF field every state-changing form carries.
pub(crate) fn csrf_field(viewer: &Viewer) -> Markup {
    html! { input type="hidden" name="csrf" value=(viewer.csrf()); }
}

/// A POST form to `action` with the CSRF field and one submit button, for one-click actions
/// (revoke, delete, retry). `class` names the form for styling and tests.
pub(crate) fn action_button(viewer: &Viewer, action: &str, class: &str, label: &str) -> Markup {
    html! {
        form class=(class) method="post" action=(action) {
            (csrf_field(viewer))
            button type="submit" { (label) }
        }
    }
}

/// A POST form like [`action_button`] for an action that destroys something: it asks
/// `question` first (`crate::confirm`: in the browser with the script, on a page of its own
/// without).
pub(crate) fn danger_button(viewer: &Viewer, action: &str, class: &str, label: &str, question: &str) -> Markup {
    html! {
        form class={ (class) " danger" } method="post" action=(action) data-confirm=(question) {
            (csrf_field(viewer))
            button type="submit" { (label) }
        }
    }
}

/// A table cell's text that is cut with an ellipsis when its column is too narrow; the whole
/// text is its `title` (shown on hover) and stays in the page for copying and searching.
pub(crate) fn clipped(text: &str) -> Markup {
    html! { span.clip title=(text) { (text) } }
}

/// A link whose text is cut like [`clipped`]'s.
pub(crate) fn clipped_link(href: &str, text: &str) -> Markup {
    html! { a.clip href=(href) title=(text) { (text) } }
}

/// A time as people read it, in UTC, with the machine-readable value.
pub(crate) fn time(at: DateTime<Utc>) -> Markup {
    html! { time datetime=(at.to_rfc3339()) { (at.format("%Y-%m-%d %H:%M:%S UTC")) } }
}

/// A time or a dash.
pub(crate) fn maybe_time(at: Option<DateTime<Utc>>) -> Markup {
    match at {
        Some(at) => time(at),
        None => html! { span.none { "—" } },
    }
}

/// A status word as a badge; `kind` picks its colour (`ok`, `bad`, `wait`; `neutral` is grey).
pub(crate) fn badge(word: &str, kind: &str) -> Markup {
    html! { span class={ "badge " (kind) } { (word) } }
}

/// The colour of a message status.
pub(crate) fn status_kind(status: &str) -> &'static str {
    match status {
        "Delivered" | "Verified" => "ok",
        "Bounced" | "Complained" | "Failed" | "Suppressed" => "bad",
        _ => "wait",
    }
}

/// The mistakes of a refused form, by field: the API's field name and what is wrong with it
/// (`None` for a mistake of the whole form). Fields named here get `aria-invalid` and point
/// with `aria-describedby` at their message, written under them ([`field_error`]).
#[derive(Debug, Default, Clone)]
pub(crate) struct FormErrors(pub(crate) Vec<(Option<String>, String)>);

impl FormErrors {
    /// The validation errors core gave, one per field.
    pub(crate) fn from_fields(fields: &[tidings_core::FieldError]) -> Self {
        Self(fields.iter().map(|f| (Some(f.field.clone()), f.message.clone())).collect())
    }

    /// A mistake of the whole form.
    pub(crate) fn whole(line: impl Into<String>) -> Self {
        Self(vec![(None, line.into())])
    }

    /// Whether there are none.
    pub(crate) fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Every mistake as a line for the error box at the top of the form.
    pub(crate) fn lines(&self) -> Vec<String> {
        self.0
            .iter()
            .map(|(field, message)| match field {
                Some(field) => format!("{field}: {message}"),
                None => message.clone(),
            })
            .collect()
    }

    /// `aria-invalid`'s value for the field named `field`: `Some("true")` when it is wrong.
    pub(crate) fn invalid(&self, field: &str) -> Option<&'static str> {
        self.0.iter().any(|(f, _)| f.as_deref() == Some(field)).then_some("true")
    }

    /// `aria-describedby`'s value for the field named `field` whose element id is `id`.
    pub(crate) fn described_by(&self, field: &str, id: &str) -> Option<String> {
        self.invalid(field).map(|_| format!("{id}-error"))
    }
}

/// The message under a field named `field` (element id `id`) that [`FormErrors`] holds
/// wrong; nothing when it is right.
pub(crate) fn field_error(errors: &FormErrors, field: &str, id: &str) -> Markup {
    let messages: Vec<&str> =
        errors.0.iter().filter(|(f, _)| f.as_deref() == Some(field)).map(|(_, m)| m.as_str()).collect();
    html! {
        @if !messages.is_empty() {
            p.field-error id={ (id) "-error" } { @for m in messages { (m) " " } }
        }
    }
}

/// The error box of a page (`#error`), with one line per message.
pub(crate) fn error_box(lines: &[String]) -> Markup {
    html! {
        div #error.error role="alert" {
            @for line in lines { p { (line) } }
        }
    }
}

/// A "next page" link (`a.next`) to `path` with `query` and the cursor, when there is one.
pub(crate) fn next_link(path: &str, query: &[(&str, String)], cursor: Option<&str>) -> Markup {
    html! {
        @if let Some(cursor) = cursor {
            p.paging { a.next href=(with_query(path, query, Some(cursor))) rel="next" { "Next page →" } }
        }
    }
}

/// `path?name=value&…&cursor=…`, every part percent-encoded; empty values left out.
pub(crate) fn with_query(path: &str, query: &[(&str, String)], cursor: Option<&str>) -> String {
    let mut out = form_urlencoded::Serializer::new(String::new());
    for (name, value) in query {
        if !value.is_empty() {
            out.append_pair(name, value);
        }
    }
    if let Some(cursor) = cursor {
        out.append_pair("cursor", cursor);
    }
    let encoded = out.finish();
    if encoded.is_empty() { path.to_owned() } else { format!("{path}?{encoded}") }
}

/// One path segment, percent-encoded (an address in `/suppressions/{email}/delete`).
pub(crate) fn segment(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, percent_encoding::NON_ALPHANUMERIC).to_string()
}
