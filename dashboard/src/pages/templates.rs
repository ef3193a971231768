//! `/templates`: the list and the create form; a template's page with its versions, the
//! new-version form, make-current buttons and a preview rendered with JSON variables typed
//! into the page. Syntax and render errors are core's messages, which name the line and
//! column (or the missing variable); a JSON mistake names its line and column too.

use axum::extract::{RawQuery, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maud::{Markup, html};
use tidings_core::Error;
use tidings_core::ids::TemplateId;
use tidings_core::model::Template;
use tidings_core::templates::Rendered;
use tidings_core::usecases::{
    AddTemplateVersionRequest, Admission, CreateTemplateRequest, Listed, RenderTemplateRequest, UpdateTemplateRequest,
};

use crate::DashboardState;
use crate::error::{OrPage, PageError, PageResult};
use crate::form::{Posted, TEMPLATE_BODY_LIMIT};
use crate::layout::{badge, csrf_field, error_box, next_link, page, time};
use crate::pages::{PageId, json_object, list_params, query_pairs};
use crate::session::{Signed, Viewer, see_other};

/// `GET /templates`.
pub(crate) async fn list(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    RawQuery(raw): RawQuery,
) -> PageResult<Response> {
    let pairs = query_pairs(raw.as_deref());
    let listed = state.core.list_templates(viewer.principal(), list_params(&pairs)).await.or_page(&viewer)?;
    Ok(render_list(&viewer, &listed, &CreateTemplateRequest::default(), &[]).into_response())
}

fn render_list(viewer: &Viewer, listed: &Listed<Template>, draft: &CreateTemplateRequest, errors: &[String]) -> Markup {
    let value = |v: &Option<String>| v.clone().unwrap_or_default();
    let body = html! {
        div.scroll {
            table #templates {
                thead { tr { th { "Name" } th { "Current version" } th.hide-narrow { "Created" } } }
                tbody {
                    @for t in &listed.items {
                        tr data-id=(t.id) {
                            td { a href={ "/templates/" (t.id) } { (t.name) } }
                            td { @if let Some(v) = t.current_version() { "v" (v.version_no) } }
                            td.hide-narrow { (time(t.created_at)) }
                        }
                    }
                }
            }
        }
        @if listed.items.is_empty() { p.none { "No templates yet." } }
        (next_link("/templates", &[], listed.next_cursor.as_deref()))
        h2 { "New template" }
        @if !errors.is_empty() { (error_box(errors)) }
        section {
            form #create-template method="post" action="/templates" {
                (csrf_field(viewer))
                label for="name" { "Name" }
                input #name type="text" name="name" required value=(value(&draft.name));
                (bodies_fields(&value(&draft.subject), &value(&draft.html), &value(&draft.text)))
                div.actions { button type="submit" { "Create" } }
            }
        }
    };
    page(Some(viewer), "Templates", body)
}

/// The subject, HTML and text fields of a template form.
fn bodies_fields(subject: &str, html_body: &str, text: &str) -> Markup {
    html! {
        label for="subject" { "Subject " span.muted { "(handlebars: {{name}})" } }
        input #subject type="text" name="subject" required value=(subject);
        label for="html" { "HTML" }
        textarea #html name="html" { (html_body) }
        label for="text" { "Text" }
        textarea #text name="text" { (text) }
    }
}

/// Template errors, and validation errors, as lines for the error box; anything else is a
/// page of its own.
fn form_errors(e: Error, viewer: &Viewer) -> Result<(StatusCode, Vec<String>), PageError> {
    match e {
        Error::Validation { fields } => Ok((
            StatusCode::UNPROCESSABLE_ENTITY,
            fields.iter().map(|f| format!("{}: {}", f.field, f.message)).collect(),
        )),
        e @ (Error::TemplateSyntax(_) | Error::TemplateRender(_)) => {
            Ok((StatusCode::UNPROCESSABLE_ENTITY, vec![e.to_string()]))
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
    match state.core.create_template(viewer.principal(), req.clone()).await {
        Ok(template) => Ok(see_other(&format!("/templates/{}", template.id))),
        Err(e) => {
            let (status, lines) = form_errors(e, &viewer)?;
            let listed = state
                .core
                .list_templates(viewer.principal(), tidings_core::usecases::ListParams::default())
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
    version_errors: Vec<String>,
    /// The variables typed for the preview, and the version picked.
    variables: String,
    version_id: Option<String>,
    /// The preview, when one was asked for.
    preview: Option<Result<Rendered, Vec<String>>>,
}

/// `GET /templates/{id}`.
pub(crate) async fn show(
    State(state): State<DashboardState>,
    Signed(viewer): Signed,
    PageId(id): PageId<TemplateId>,
) -> PageResult<Response> {
    let template = state.core.get_template(viewer.principal(), id).await.or_page(&viewer)?;
    Ok(render(&viewer, &template, &Extras::default()).into_response())
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
    let body = html! {
        h2 { "Versions" }
        div.scroll {
            table #versions {
                thead { tr { th { "Version" } th { "Subject" } th.hide-narrow { "Created" } th {} } }
                tbody {
                    @for v in &versions {
                        tr data-id=(v.id) {
                            td { "v" (v.version_no) }
                            td { (v.subject) }
                            td.hide-narrow { (time(v.created_at)) }
                            td {
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
        @if let Some(v) = current {
            h2 { "Current version (v" (v.version_no) ")" }
            section #current {
                dl.fields {
                    dt { "Subject" } dd.mono { (v.subject) }
                    dt { "HTML" } dd { @match &v.html { Some(h) => pre { (h) }, None => span.none { "none" } } }
                    dt { "Text" } dd { @match &v.text { Some(x) => pre { (x) }, None => span.none { "none" } } }
                }
            }
        }
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
                label for="variables" { "Variables (a JSON object)" }
                textarea #variables name="variables" placeholder="{\"name\": \"Ann\"}" { (extras.variables) }
                div.actions { button type="submit" { "Preview" } }
            }
            @match &extras.preview {
                Some(Ok(rendered)) => {
                    div #preview-result {
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
                Some(Err(lines)) => { (error_box(lines)) }
                None => {}
            }
        }
        h2 { "New version" }
        @if !extras.version_errors.is_empty() { (error_box(&extras.version_errors)) }
        section {
            form #new-version method="post" action={ "/templates/" (id) "/versions" } {
                (csrf_field(viewer))
                (bodies_fields(draft.subject.as_deref().unwrap_or(""), draft.html.as_deref().unwrap_or(""), draft.text.as_deref().unwrap_or("")))
                label.check for="make_current" {
                    input #make_current type="checkbox" name="make_current" value="on" checked[draft.make_current.unwrap_or(true)];
                    "Make it the current version"
                }
                div.actions { button type="submit" { "Add version" } }
            }
        }
    };
    page(Some(viewer), &t.name, body)
}

/// `POST /templates/{id}/versions` (`subject`, `html`, `text`, `make_current`).
pub(crate) async fn add_version(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let req = AddTemplateVersionRequest {
        subject: fields.text("subject"),
        html: fields.body("html"),
        text: fields.body("text"),
        make_current: Some(fields.checked("make_current")),
    };
    match state.core.add_template_version(viewer.principal(), id, req.clone()).await {
        Ok(_) => Ok(see_other(&format!("/templates/{id}"))),
        Err(e) => {
            let (status, lines) = form_errors(e, &viewer)?;
            let template = state.core.get_template(viewer.principal(), id).await.or_page(&viewer)?;
            let extras = Extras { draft: Some(req), version_errors: lines, ..Extras::default() };
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
    let template = state.core.update_template(posted.viewer.principal(), id, req).await.or_page(&posted.viewer)?;
    Ok(see_other(&format!("/templates/{}", template.id)))
}

/// `POST /templates/{id}/preview` (`variables` as JSON, `version_id`): the template page
/// with the rendered result or what went wrong. It renders like a send, so it takes one of
/// the key's send tokens, as `POST /v1/templates/{id}/render` does.
pub(crate) async fn preview(
    State(state): State<DashboardState>,
    PageId(id): PageId<TemplateId>,
    posted: Posted<TEMPLATE_BODY_LIMIT>,
) -> PageResult<Response> {
    let Posted { viewer, fields } = posted;
    let who = viewer.principal();
    let template = state.core.get_template(who, id).await.or_page(&viewer)?;
    let typed = fields.get("variables").unwrap_or("").to_owned();
    let version_id = fields.text("version_id");
    let (status, preview) = match json_object("variables", Some(&typed)) {
        Err(line) => (StatusCode::UNPROCESSABLE_ENTITY, Err(vec![line])),
        Ok(variables) => {
            let req = RenderTemplateRequest { variables, version_id: version_id.clone() };
            match state.core.render_template_rate_limited(&*state.limits, who, id, req).await {
                Ok(Admission::Allowed((rendered, _))) => (StatusCode::OK, Ok(rendered)),
                Ok(Admission::Limited { retry_after }) => (
                    StatusCode::TOO_MANY_REQUESTS,
                    Err(vec![format!("This key's send rate is used up; try again in {} s.", retry_after.seconds)]),
                ),
                Err(e) => {
                    let (status, lines) = form_errors(e, &viewer)?;
                    (status, Err(lines))
                }
            }
        }
    };
    let extras = Extras { variables: typed, version_id, preview: Some(preview), ..Extras::default() };
    Ok((status, render(&viewer, &template, &extras)).into_response())
}
