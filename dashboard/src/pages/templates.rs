//! `/templates`: the list and the create form; a template's page with its id (copy button)
//! and the `curl` that sends with it, its versions, the new-version form with a preview
//! beside it rendered with JSON variables typed into the page, make-current buttons, a test
//! send with the template, and deletion. Syntax and render errors are core's messages,
//! which name the line and column (or the missing variable); a JSON mistake names its line
//! and column too.

use axum::extract::{RawQuery, State};
use axum::http::header::HOST;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::TemplateId;
use tidings_core::model::Template;
use tidings_core::templates::Rendered;
use tidings_core::usecases::{
    AddTemplateVersionRequest, Admission, CreateTemplateRequest, Listed, RenderTemplateRequest, SendRequest,
    UpdateTemplateRequest,
};

use crate::DashboardState;
use crate::confirm::{Ask, confirmed};
use crate::error::{OrPage, PageError, PageResult};
use crate::form::{Posted, TEMPLATE_BODY_LIMIT};
use crate::layout::{
    FormErrors, badge, clipped, clipped_link, csrf_field, error_box, field_error, next_link, page, time,
};
use crate::pages::messages::send_test;
use crate::pages::{PageId, json_object, list_params, query_pairs};
use crate::session::{Signed, Viewer, see_other};

/// `GET /templates`.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let listed = state.core.templates().list(viewer.principal(), list_params(&pairs)).await.or_page(&viewer)?;
    Ok(render_list(&viewer, &listed, &CreateTemplateRequest::default(), &FormErrors::default()).into_response())
}

fn render_list(
    viewer: &Viewer,
    listed: &Listed<Template>,
    draft: &CreateTemplateRequest,
    errors: &FormErrors,
) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let body = html! {
        div.scroll {
            table.fixed #templates {
                thead { tr { th { "Name" } th.hide-narrow { "Id" } th.w-num { "Current" } th.hide-narrow.w-date { "Created" } } }
                tbody {
                    @for t in &listed.items {
                        tr data-id=(t.id) {
                            td.clip-cell data-label="Name" { (clipped_link(&format!("/templates/{}", t.id), &t.name)) }
                            td.mono.hide-narrow.clip-cell data-label="Id" { (clipped(&t.id.to_string())) }
                            td data-label="Current" { @if let Some(v) = t.current_version() { "v" (v.version_no) } }
                            td.hide-narrow data-label="Created" { (time(t.created_at)) }
                        }
                    }
                }
            }
        }
        @if listed.items.is_empty() { p.none { "No templates yet." } }
        (next_link("/templates", &[], listed.next_cursor.as_deref()))
        h2 { "New template" }
        @if !errors.is_empty() { (error_box(&errors.lines())) }
        section {
            form #create-template method="post" action="/templates" {
                (csrf_field(viewer))
                label for="name" { "Name" }
                input #name type="text" name="name" required value=(value(&draft.name))
                    aria-invalid=[errors.invalid("name")] aria-describedby=[errors.described_by("name", "name")];
                (field_error(errors, "name", "name"))
                (bodies_fields(&value(&draft.subject), &value(&draft.html), &value(&draft.text), errors))
                div.actions { button type="submit" { "Create" } }
            }
        }
    };
    page(Some(viewer), "Templates", body)
}

/// The subject, HTML and text fields of a template form, the wrong ones marked.
fn bodies_fields(subject: &str, html_body: &str, text: &str, errors: &FormErrors) -> Markup {
    html! {
        label for="subject" { "Subject " span.muted { "(handlebars: {{name}})" } }
        input #subject type="text" name="subject" required value=(subject)
            aria-invalid=[errors.invalid("subject")] aria-describedby=[errors.described_by("subject", "subject")];
        (field_error(errors, "subject", "subject"))
        label for="html" { "HTML" }
        textarea #html name="html" aria-invalid=[errors.invalid("html")] aria-describedby=[errors.described_by("html", "html")] { (html_body) }
        (field_error(errors, "html", "html"))
        label for="text" { "Text" }
        textarea #text name="text" aria-invalid=[errors.invalid("text")] aria-describedby=[errors.described_by("text", "text")] { (text) }
        (field_error(errors, "text", "text"))
    }
}

/// Template errors, and validation errors, by field for the form; anything else is a page
/// of its own. A syntax error is core's message naming the part, line and column: the whole
/// form's.
fn form_errors(e: Error, viewer: &Viewer) -> Result<(StatusCode, FormErrors), PageError> {
    match e {
        Error::Validation { fields } => Ok((StatusCode::UNPROCESSABLE_ENTITY, FormErrors::from_fields(&fields))),
        e @ (Error::TemplateSyntax(_) | Error::TemplateRender(_)) => {
            Ok((StatusCode::UNPROCESSABLE_ENTITY, FormErrors::whole(e.to_string())))
        }
        other => Err(PageError::from(other).with_viewer(viewer)),
    }
}

/// `POST /templates` (`name`, `subject`, `html`, `text`): 303 to the new template.
pub(crate) async fn create(
    State(state): State<DashboardState>,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = CreateTemplateRequest {
        name: fields.text("name"),
        subject: fields.text("subject"),
        html: fields.body("html"),
        text: fields.body("text"),
    };
    match state.core.templates().create(viewer.principal(), req.clone()).await {
        Ok(template) => Ok(see_other(&format!("/templates/{}", template.id))),
        Err(e) => {
            let (status, lines) = form_errors(e, &viewer)?;
            let listed = state
                .core
                .templates()
                .list(viewer.principal(), tidings_core::usecases::ListParams::default())
                .await
                .or_page(&viewer)?;
            Ok((status, render_list(&viewer, &listed, &req, &lines)).into_response())
        }
    }
}

/// What the template page shows besides the template.
#[derive(Default)]
struct Extras {
    /// The draft of a new version that was refused, to show again.
    draft: Option<AddTemplateVersionRequest>,
    /// Errors of the version form.
    version_errors: FormErrors,
    /// The variables typed for the preview, and the version picked.
    variables: String,
    version_id: Option<String>,
    /// The preview, when one was asked for.
    preview: Option<Result<Rendered, Vec<String>>>,
    /// Whether the preview is of the editor's draft (not of a stored version), and the
    /// variables typed beside the draft.
    of_draft: bool,
    draft_variables: String,
    /// The test send as typed (`to`, `from`, `variables`), when it was refused, and why.
    send: Option<(SendDraft, FormErrors)>,
    /// `https://host` as the browser reached the server, for the API snippet.
    base_url: String,
}

/// The test-send form as typed.
#[derive(Default, Clone)]
struct SendDraft {
    to: String,
    from: String,
    variables: String,
}

/// `https://` and the request's `Host` (the address the person reached the server at), for
/// the API snippet; the server's default address without one.
fn base_url(headers: &HeaderMap) -> String {
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).filter(|h| !h.is_empty()).unwrap_or("127.0.0.1:8443");
    format!("https://{host}")
}

/// The placeholders (`{{name}}`, `{{user.name}}`) of a version's subject and bodies, in
/// order of first use, without helpers, blocks and partials: the variables a send gives.
fn placeholders(texts: &[&str]) -> Vec<String> {
    let mut names = Vec::new();
    for text in texts {
        let mut rest = *text;
        while let Some(start) = rest.find("{{") {
            rest = &rest[start + 2..];
            let Some(end) = rest.find("}}") else { break };
            let inner = rest[..end].trim_start_matches('{').trim();
            rest = &rest[end + 2..];
            let plain = !inner.is_empty()
                && inner.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.')
                && !inner.starts_with(|c: char| c.is_ascii_digit() || c == '.')
                && inner != "else"
                && inner != "this";
            let top = inner.split('.').next().unwrap_or(inner).to_owned();
            if plain && !names.contains(&top) {
                names.push(top);
            }
        }
    }
    names
}

/// The `curl` that sends with template `id`, with a value to fill in for each of `names`.
fn api_snippet(base_url: &str, id: &str, names: &[String]) -> String {
    let variables = names.iter().map(|n| format!("\"{n}\": \"...\"")).collect::<Vec<_>>().join(", ");
    format!(
        "curl -sk {base_url}/v1/messages -H \"Authorization: Bearer tid_...\" -H \"Content-Type: application/json\" \\\n  \
         -d '{{\"to\": \"you@example.com\", \"templateId\": \"{id}\", \"variables\": {{{variables}}}}}'"
    )
}

/// `GET /templates/{id}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<TemplateId>,
    headers: HeaderMap,
) -> PageResult<Response> {
    let template = state.core.templates().get(viewer.principal(), id).await.or_page(&viewer)?;
    let extras = Extras { base_url: base_url(&headers), ..Extras::default() };
    Ok(render(&viewer, &template, &extras).into_response())
}

fn render(viewer: &Viewer, t: &Template, extras: &Extras) -> Markup {
    let id = t.id.to_string();
    let current = t.current_version();
    let draft = extras.draft.clone().unwrap_or_else(|| AddTemplateVersionRequest {
        subject: current.map(|v| v.subject.clone()),
        html: current.and_then(|v| v.html.clone()),
        text: current.and_then(|v| v.text.clone()),
        make_current: Some(true),
    });
    let mut versions: Vec<_> = t.versions.iter().collect();
    versions.sort_by_key(|v| std::cmp::Reverse(v.version_no));
    let names = current
        .map(|v| placeholders(&[&v.subject, v.html.as_deref().unwrap_or(""), v.text.as_deref().unwrap_or("")]))
        .unwrap_or_default();
    let snippet = api_snippet(&extras.base_url, &id, &names);
    let (send, send_errors) = extras.send.clone().unwrap_or_default();
    let body = html! {
        section #template-api {
            dl.fields {
                dt { "Id" }
                dd {
                    code #template-id { (id) } " "
                    button.copy type="button" data-copy=(id) hidden aria-label="Copy the template id" { "Copy" }
                }
            }
            h2 { "Send with the API" }
            p.muted { "The current version is rendered with the variables of each send; " code { "templateVersionId" } " picks a version." }
            pre #api-snippet { (snippet) }
            button.copy type="button" data-copy=(snippet) hidden aria-label="Copy the curl command" { "Copy" }
        }
        h2 { "Versions" }
        div.scroll {
            table.fixed #versions {
                thead { tr { th.w-num { "Version" } th { "Subject" } th.hide-narrow.w-date { "Created" } th.w-wide-act { span.visually-hidden { "Action" } } } }
                tbody {
                    @for v in &versions {
                        tr data-id=(v.id) {
                            td data-label="Version" { "v" (v.version_no) }
                            td.clip-cell data-label="Subject" { (clipped(&v.subject)) }
                            td.hide-narrow data-label="Created" { (time(v.created_at)) }
                            td.act {
                                @if v.id == t.current_version_id {
                                    (badge("current", "ok"))
                                } @else {
                                    form.make-current method="post" action={ "/templates/" (id) "/current" } {
                                        (csrf_field(viewer))
                                        input type="hidden" name="version_id" value=(v.id);
                                        button type="submit" { "Make current" }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        div.preview-beside {
            div #editor {
                h2 { "New version" }
                @if !extras.version_errors.is_empty() { (error_box(&extras.version_errors.lines())) }
                section {
                    form #new-version method="post" action={ "/templates/" (id) "/versions" } {
                        (csrf_field(viewer))
                        (bodies_fields(draft.subject.as_deref().unwrap_or(""), draft.html.as_deref().unwrap_or(""), draft.text.as_deref().unwrap_or(""), &extras.version_errors))
                        label.check for="make_current" {
                            input #make_current type="checkbox" name="make_current" value="on" checked[draft.make_current.unwrap_or(true)];
                            "Make it the current version"
                        }
                        label for="draft-variables" { "Variables for the preview (a JSON object)" }
                        textarea #draft-variables name="variables" placeholder="{\"name\": \"Ann\"}" { (extras.draft_variables) }
                        div.actions {
                            button type="submit" { "Add version" }
                            button.secondary #preview-draft type="submit" formaction={ "/templates/" (id) "/preview-draft" } { "Preview this draft" }
                        }
                    }
                }
            }
            div #preview-panel {
                h2 { "Preview" }
                section {
                    form #preview-form method="post" action={ "/templates/" (id) "/preview" } {
                        (csrf_field(viewer))
                        label for="version_id" { "Version" }
                        select #version_id name="version_id" {
                            @for v in &versions {
                                option value=(v.id) selected[extras.version_id.as_deref() == Some(&v.id.to_string()) || (extras.version_id.is_none() && v.id == t.current_version_id)] {
                                    "v" (v.version_no) @if v.id == t.current_version_id { " (current)" }
                                }
                            }
                        }
                        @let preview_invalid = !extras.of_draft && matches!(extras.preview, Some(Err(_)));
                        label for="variables" { "Variables (a JSON object)" }
                        textarea #variables name="variables" placeholder="{\"name\": \"Ann\"}"
                            aria-invalid=[preview_invalid.then_some("true")] aria-describedby=[preview_invalid.then_some("preview-error")] { (extras.variables) }
                        div.actions { button type="submit" { "Preview" } }
                    }
                    @match &extras.preview {
                        Some(Ok(rendered)) => {
                            div #preview-result data-of=(if extras.of_draft { "draft" } else { "version" }) {
                                @if extras.of_draft { p.muted { "The draft in the editor, not saved." } }
                                dl.fields {
                                    dt { "Subject" } dd #preview-subject { (rendered.subject) }
                                }
                                @if let Some(h) = &rendered.html {
                                    h3 { "HTML" }
                                    // srcdoc inherits this page's policy (no script, nothing inline) and the
                                    // sandbox gives it no origin: the rendered markup cannot act.
                                    iframe.preview #template-preview sandbox="" srcdoc=(h) title="The rendered HTML" {}
                                    details { summary { "HTML source" } pre #preview-html { (h) } }
                                }
                                @if let Some(x) = &rendered.text {
                                    h3 { "Text" }
                                    pre #preview-text { (x) }
                                }
                            }
                        }
                        Some(Err(lines)) => { div #preview-error { (error_box(lines)) } }
                        None => {
                            @if let Some(v) = current {
                                div #current {
                                    p.muted { "The current version (v" (v.version_no) "), not rendered: preview it with variables above." }
                                    dl.fields {
                                        dt { "Subject" } dd.mono { (v.subject) }
                                        dt { "HTML" } dd { @match &v.html { Some(h) => pre { (h) }, None => span.none { "none" } } }
                                        dt { "Text" } dd { @match &v.text { Some(x) => pre { (x) }, None => span.none { "none" } } }
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
        h2 { "Send a test" }
        section {
            @if !send_errors.is_empty() { (error_box(&send_errors.lines())) }
            form #template-send method="post" action={ "/templates/" (id) "/send" } {
                (csrf_field(viewer))
                label for="send-to" { "To" }
                input #send-to type="text" name="to" inputmode="email" autocomplete="off" required value=(send.to)
                    aria-invalid=[send_errors.invalid("to")] aria-describedby=[send_errors.described_by("to", "send-to")];
                (field_error(&send_errors, "to", "send-to"))
                label for="send-from" { "From " span.muted { "(optional: an address on a verified domain; empty uses the default sender)" } }
                input #send-from type="text" name="from" autocomplete="off" value=(send.from)
                    aria-invalid=[send_errors.invalid("from")] aria-describedby=[send_errors.described_by("from", "send-from")];
                (field_error(&send_errors, "from", "send-from"))
                label for="send-variables" { "Variables (a JSON object)" }
                textarea #send-variables name="variables" placeholder="{\"name\": \"Ann\"}"
                    aria-invalid=[send_errors.invalid("variables")] aria-describedby=[send_errors.described_by("variables", "send-variables")] { (send.variables) }
                (field_error(&send_errors, "variables", "send-variables"))
                div.actions { button type="submit" { "Send a test with the current version" } }
            }
        }
        h2 { "Delete" }
        section {
            form.danger #delete-template method="post" action={ "/templates/" (id) "/delete" }
                data-confirm={ "Delete the template " (t.name) "? Sends that name it will be refused." } {
                (csrf_field(viewer))
                p { "Deleting the template removes every version; sends that name it are refused from then on." }
                button type="submit" { "Delete this template" }
            }
        }
    };
    page(Some(viewer), &t.name, body)
}

/// `POST /templates/{id}/versions` (`subject`, `html`, `text`, `make_current`).
pub(crate) async fn add_version(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    headers: HeaderMap,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = AddTemplateVersionRequest {
        subject: fields.text("subject"),
        html: fields.body("html"),
        text: fields.body("text"),
        make_current: Some(fields.checked("make_current")),
    };
    match state.core.templates().add_version(viewer.principal(), id, req.clone()).await {
        Ok(_) => Ok(see_other(&format!("/templates/{id}"))),
        Err(e) => {
            let (status, lines) = form_errors(e, &viewer)?;
            let template = state.core.templates().get(viewer.principal(), id).await.or_page(&viewer)?;
            let extras =
                Extras { draft: Some(req), version_errors: lines, base_url: base_url(&headers), ..Extras::default() };
            Ok((status, render(&viewer, &template, &extras)).into_response())
        }
    }
}

/// `POST /templates/{id}/current` (`version_id`).
pub(crate) async fn make_current(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    posted: Posted,
) -> PageResult<Response> {
    let req = UpdateTemplateRequest { name: None, current_version_id: posted.fields.text("version_id") };
    let template = state.core.templates().update(posted.viewer.principal(), id, req).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/templates/{}", template.id)))
}

/// `POST /templates/{id}/preview` (`variables` as JSON, `version_id`): the template page
/// with the rendered result or what went wrong. It renders like a send, so it takes one of
/// the key's send tokens, as `POST /v1/templates/{id}/render` does.
pub(crate) async fn preview(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    headers: HeaderMap,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let who = viewer.principal();
    let template = state.core.templates().get(who, id).await.or_page(&viewer)?;
    let typed = fields.get("variables").unwrap_or("").to_owned();
    let version_id = fields.text("version_id");
    let (status, preview) = match json_object("variables", Some(&typed)) {
        Err(line) => (StatusCode::UNPROCESSABLE_ENTITY, Err(vec![line])),
        Ok(variables) => {
            let req = RenderTemplateRequest { variables, version_id: version_id.clone() };
            match state.core.templates().render_rate_limited(&*state.limits, who, id, req).await {
                Ok(Admission::Allowed((rendered, _))) => (StatusCode::OK, Ok(rendered)),
                Ok(Admission::Limited { retry_after }) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    Err(vec![format!("This key's send rate is used up; try again in {} s.", retry_after.seconds)]),
                ),
                Err(e) => {
                    let (status, errors) = form_errors(e, &viewer)?;
                    (status, Err(errors.lines()))
                }
            }
        }
    };
    let extras = Extras {
        variables: typed,
        version_id,
        preview: Some(preview),
        base_url: base_url(&headers),
        ..Extras::default()
    };
    Ok((status, render(&viewer, &template, &extras)).into_response())
}

/// `POST /templates/{id}/preview-draft` (the new-version form: `subject`, `html`, `text`,
/// `make_current`, and `variables` as JSON): the template page with the draft rendered
/// beside the editor, which keeps it as typed; nothing is stored. It takes one of the key's
/// send tokens, as a preview of a stored version does.
pub(crate) async fn preview_draft(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    headers: HeaderMap,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let who = viewer.principal();
    let template = state.core.templates().get(who, id).await.or_page(&viewer)?;
    let draft = AddTemplateVersionRequest {
        subject: fields.text("subject"),
        html: fields.body("html"),
        text: fields.body("text"),
        make_current: Some(fields.checked("make_current")),
    };
    let typed = fields.get("variables").unwrap_or("").to_owned();
    let (status, preview) = match json_object("variables", Some(&typed)) {
        Err(line) => (StatusCode::UNPROCESSABLE_ENTITY, Err(vec![line])),
        Ok(variables) => {
            match state
                .core
                .templates()
                .render_draft_rate_limited(&*state.limits, who, id, draft.clone(), variables)
                .await
            {
                Ok(Admission::Allowed((rendered, _))) => (StatusCode::OK, Ok(rendered)),
                Ok(Admission::Limited { retry_after }) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    Err(vec![format!("This key's send rate is used up; try again in {} s.", retry_after.seconds)]),
                ),
                Err(e) => {
                    let (status, errors) = form_errors(e, &viewer)?;
                    (status, Err(errors.lines()))
                }
            }
        }
    };
    let extras = Extras {
        draft: Some(draft),
        draft_variables: typed,
        preview: Some(preview),
        of_draft: true,
        base_url: base_url(&headers),
        ..Extras::default()
    };
    Ok((status, render(&viewer, &template, &extras)).into_response())
}

/// `POST /templates/{id}/send` (`to`, `from`, `variables` as JSON): sends a message with the
/// template's current version, as `POST /v1/messages` with `templateId` does and under the
/// key's send rate, like the test-send form; 303 to the message, or the template page with
/// the form again and what was wrong.
pub(crate) async fn send(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    headers: HeaderMap,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let template = state.core.templates().get(viewer.principal(), id).await.or_page(&viewer)?;
    let draft = SendDraft {
        to: fields.get("to").unwrap_or("").trim().to_owned(),
        from: fields.get("from").unwrap_or("").trim().to_owned(),
        variables: fields.get("variables").unwrap_or("").to_owned(),
    };
    let refused = |status: StatusCode, errors: FormErrors| {
        let extras = Extras { send: Some((draft.clone(), errors)), base_url: base_url(&headers), ..Extras::default() };
        Ok((status, render(&viewer, &template, &extras)).into_response())
    };
    let variables = match json_object("variables", Some(&draft.variables)) {
        Ok(variables) => variables,
        Err(line) => {
            let message = line.trim_start_matches("variables: ").to_owned();
            return refused(
                StatusCode::UNPROCESSABLE_ENTITY,
                FormErrors(vec![(Some("variables".to_owned()), message)]),
            );
        }
    };
    let req = SendRequest {
        to: fields.text("to").map(|t| super::messages::address_list(&t)),
        from: fields.text("from"),
        template_id: Some(template.id.to_string()),
        variables,
        ..SendRequest::default()
    };
    match send_test(&state, &viewer, req).await? {
        Ok(message) => Ok(see_other(&format!("/messages/{message}"))),
        Err((status, errors)) => refused(status, errors),
    }
}

/// `POST /templates/{id}/delete` (`confirm=yes`; without it, the confirmation page): 303 to
/// the list.
pub(crate) async fn delete(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    posted: Posted,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    if !confirmed(&fields) {
        let template = state.core.templates().get(viewer.principal(), id).await.or_page(&viewer)?;
        let (action, back) = (format!("/templates/{}/delete", template.id), format!("/templates/{}", template.id));
        let question =
            format!("Delete the template {}? Every version goes; sends that name it are refused.", template.name);
        return Ok(Ask { action: &action, question, yes: "Delete the template", back: &back }.page(&viewer));
    }
    state.core.templates().delete(viewer.principal(), id).await.or_page(&viewer)?;
    Ok(see_other("/templates"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn placeholders_are_the_plain_variables_in_order_of_first_use() {
        let names =
            placeholders(&["Receipt {{order}}", "<p>{{#if vip}}Hi {{ user.name }}{{/if}} {{order}} {{{raw}}}</p>"]);
        assert_eq!(names, ["order", "user", "raw"]);
        assert!(placeholders(&["{{> partial}} {{else}} {{this}}"]).is_empty());
    }

    #[test]
    fn the_snippet_is_a_curl_with_the_id_and_variables() {
        let snippet = api_snippet("https://127.0.0.1:8443", "tpl_1", &["name".to_owned()]);
        assert!(snippet.starts_with("curl -sk https://127.0.0.1:8443/v1/messages "), "{snippet}");
        assert!(
            snippet.contains(r#"-d '{"to": "you@example.com", "templateId": "tpl_1", "variables": {"name": "..."}}'"#),
            "{snippet}"
        );
    }
}
