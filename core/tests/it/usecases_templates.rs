//! The template use cases over the in-memory store: creation and its validation, versions,
//! rendering, the version lookup of the send use case, isolation and scope.

use chrono::Duration;
use serde_json::json;
use tidings_core::Error;
use tidings_core::ids::TemplateId;
use tidings_core::model::{Template, TemplateVersion};
use tidings_core::usecases::{
    AddTemplateVersionRequest, CreateTemplateRequest, ListParams, Principal, RenderTemplateRequest,
    UpdateTemplateRequest,
};
use tidings_testing::TestCore;
use tidings_testing::fixtures::ulid;
use tidings_testing::service::{full_key, invalid_fields, send_key_beside};

fn create(name: &str, subject: &str, html: Option<&str>, text: Option<&str>) -> CreateTemplateRequest {
    CreateTemplateRequest {
        name: Some(name.to_owned()),
        subject: Some(subject.to_owned()),
        html: html.map(str::to_owned),
        text: text.map(str::to_owned),
    }
}

fn version(subject: &str, make_current: Option<bool>) -> AddTemplateVersionRequest {
    AddTemplateVersionRequest {
        subject: Some(subject.to_owned()),
        html: Some(format!("<p>{subject}</p>")),
        text: None,
        make_current,
    }
}

fn render_with(variables: serde_json::Value) -> RenderTemplateRequest {
    RenderTemplateRequest { variables: Some(variables), version_id: None }
}

async fn welcome(t: &TestCore, who: &Principal) -> Template {
    t.core
        .templates()
        .create(who, create("Welcome", "Welcome, {{name}}", Some("<p>Hi {{name}}</p>"), Some("Hi {{name}}")))
        .await
        .unwrap()
}

/// A template with versions 1 (current at first), 2 (current) and 3 (not current).
async fn three_versions(t: &TestCore, who: &Principal) -> (Template, [TemplateVersion; 3]) {
    let template = welcome(t, who).await;
    let id = template.id.to_string();
    let v2 =
        t.core.templates().add_version(who, TemplateId::parse_or_none(&id), version("Second", None)).await.unwrap();
    let v3 = t
        .core
        .templates()
        .add_version(who, TemplateId::parse_or_none(&id), version("Third", Some(false)))
        .await
        .unwrap();
    let v1 = template.versions[0].clone();
    (t.core.templates().get(who, TemplateId::parse_or_none(&id)).await.unwrap(), [v1, v2, v3])
}

// --- creation -------------------------------------------------------------------------------

#[tokio::test]
async fn creating_a_template_makes_its_first_version_current() {
    let t = TestCore::new();
    let who = full_key();

    let template = welcome(&t, &who).await;

    assert_eq!(template.name, "Welcome");
    assert_eq!(template.workspace_id, who.workspace_id);
    assert_eq!(template.created_at, t.now());
    assert_eq!(template.versions.len(), 1);
    let first = &template.versions[0];
    assert_eq!(template.current_version_id, first.id);
    assert_eq!(first.version_no, 1);
    assert_eq!(first.template_id, template.id);
    assert_eq!(first.subject, "Welcome, {{name}}");
    assert_eq!(first.html.as_deref(), Some("<p>Hi {{name}}</p>"));
    assert_eq!(first.text.as_deref(), Some("Hi {{name}}"));
    assert_eq!(first.created_at, t.now());
    assert_eq!(t.core.templates().get(&who, template.id).await.unwrap(), template);
}

#[tokio::test]
async fn name_and_subject_are_required_and_reported_together() {
    let t = TestCore::new();
    let who = full_key();

    assert_eq!(
        invalid_fields(t.core.templates().create(&who, CreateTemplateRequest::default()).await),
        ["name", "subject"]
    );
    assert_eq!(
        invalid_fields(t.core.templates().create(&who, create("  ", " ", None, None)).await),
        ["name", "subject"]
    );
    assert_eq!(
        invalid_fields(t.core.templates().create(&who, create(&"n".repeat(201), "Hi", None, None)).await),
        ["name"]
    );
    assert_eq!(
        invalid_fields(t.core.templates().create(&who, create("Welcome", "Hi\r\nBcc: x@y.com", None, None)).await),
        ["subject"]
    );
    assert!(t.core.templates().list(&who, ListParams::default()).await.unwrap().items.is_empty());

    let longest = t.core.templates().create(&who, create(&"é".repeat(200), "Hi", None, None)).await.unwrap();
    assert_eq!(longest.name.chars().count(), 200);
}

#[tokio::test]
async fn a_template_without_bodies_is_allowed_and_empty_bodies_count_as_absent() {
    let t = TestCore::new();
    let who = full_key();

    let template = t.core.templates().create(&who, create("Bare", "Hello", Some(""), None)).await.unwrap();

    assert_eq!(template.versions[0].html, None);
    assert_eq!(template.versions[0].text, None);
    let rendered = t.core.templates().render(&who, template.id, RenderTemplateRequest::default()).await.unwrap();
    assert_eq!(rendered.subject, "Hello");
    assert_eq!(rendered.html, None);
    assert_eq!(rendered.text, None);
}

#[tokio::test]
async fn a_syntax_error_is_reported_with_its_line_and_column_and_nothing_is_stored() {
    let t = TestCore::new();
    let who = full_key();

    let result = t
        .core
        .templates()
        .create(&who, create("Broken", "Hi", Some("<p>\n  {{#if vip}}Dear customer\n</p>"), None))
        .await;

    let Err(Error::TemplateSyntax(message)) = result else { panic!("expected a syntax error, got {result:?}") };
    assert!(message.contains("html"), "{message}");
    assert!(message.contains("line"), "{message}");
    assert!(message.contains("column"), "{message}");
    assert!(t.core.templates().list(&who, ListParams::default()).await.unwrap().items.is_empty());

    let subject = t.core.templates().create(&who, create("Broken", "Hi {{name", None, None)).await;
    assert!(matches!(subject, Err(Error::TemplateSyntax(ref m)) if m.contains("subject")), "{subject:?}");
}

// --- rendering ------------------------------------------------------------------------------

#[tokio::test]
async fn rendering_escapes_variables_in_html_only() {
    let t = TestCore::new();
    let who = full_key();
    let template = t
        .core
        .templates()
        .create(
            &who,
            create(
                "Escape",
                "Re: {{thing}}",
                Some("<p>{{thing}}</p><div>{{{thing}}}</div>"),
                Some("You said {{thing}}"),
            ),
        )
        .await
        .unwrap();

    let rendered = t
        .core
        .templates()
        .render(&who, template.id, render_with(json!({"thing": "<b>Tom & Jerry</b>"})))
        .await
        .unwrap();

    assert_eq!(rendered.subject, "Re: <b>Tom & Jerry</b>");
    assert_eq!(
        rendered.html.as_deref(),
        Some("<p>&lt;b&gt;Tom &amp; Jerry&lt;/b&gt;</p><div><b>Tom & Jerry</b></div>")
    );
    assert_eq!(rendered.text.as_deref(), Some("You said <b>Tom & Jerry</b>"));
}

#[tokio::test]
async fn a_missing_variable_is_a_render_error_naming_it() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;

    let result = t.core.templates().render(&who, template.id, render_with(json!({"other": 1}))).await;

    let Err(Error::TemplateRender(message)) = result else { panic!("expected a render error, got {result:?}") };
    assert!(message.contains("name"), "{message}");
    let absent = t.core.templates().render(&who, template.id, RenderTemplateRequest::default()).await;
    assert!(matches!(absent, Err(Error::TemplateRender(_))), "{absent:?}");
}

#[tokio::test]
async fn render_requests_are_validated() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let other = welcome(&t, &who).await;
    let id = template.id.to_string();

    assert_eq!(
        invalid_fields(
            t.core.templates().render(&who, TemplateId::parse_or_none(&id), render_with(json!(["name"]))).await
        ),
        ["variables"]
    );
    assert_eq!(
        invalid_fields(
            t.core.templates().render(&who, TemplateId::parse_or_none(&id), render_with(json!("Tom"))).await
        ),
        ["variables"]
    );
    let foreign_version = RenderTemplateRequest {
        variables: Some(json!({"name": "Tom"})),
        version_id: Some(other.current_version_id.to_string()),
    };
    assert_eq!(
        invalid_fields(t.core.templates().render(&who, TemplateId::parse_or_none(&id), foreign_version).await),
        ["versionId"]
    );
    let both = RenderTemplateRequest { variables: Some(json!(3)), version_id: Some("nope".to_owned()) };
    assert_eq!(
        invalid_fields(t.core.templates().render(&who, TemplateId::parse_or_none(&id), both).await),
        ["variables", "versionId"]
    );
    let null = RenderTemplateRequest { variables: Some(serde_json::Value::Null), version_id: None };
    assert!(matches!(
        t.core.templates().render(&who, TemplateId::parse_or_none(&id), null).await,
        Err(Error::TemplateRender(_))
    ));
    assert_eq!(
        t.core
            .templates()
            .render(&who, TemplateId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"), render_with(json!({})))
            .await,
        Err(Error::NotFound("template"))
    );
}

// --- versions -------------------------------------------------------------------------------

#[tokio::test]
async fn versions_are_numbered_in_order_and_become_current_unless_told_not_to() {
    let t = TestCore::new();
    let who = full_key();

    let (template, [v1, v2, v3]) = three_versions(&t, &who).await;

    assert_eq!([v1.version_no, v2.version_no, v3.version_no], [1, 2, 3]);
    assert_eq!(v2.template_id, template.id);
    assert_eq!(v2.subject, "Second");
    assert_eq!(v2.html.as_deref(), Some("<p>Second</p>"));
    assert_eq!(v2.text, None, "a version does not inherit bodies");
    assert_eq!(template.current_version_id, v2.id);
    assert_eq!(template.versions, [v1, v2, v3]);
}

#[tokio::test]
async fn a_new_version_needs_a_subject_and_valid_syntax() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let id = template.id.to_string();

    assert_eq!(
        invalid_fields(
            t.core
                .templates()
                .add_version(&who, TemplateId::parse_or_none(&id), AddTemplateVersionRequest::default())
                .await
        ),
        ["subject"]
    );
    let broken = AddTemplateVersionRequest { text: Some("{{/if}}".to_owned()), ..version("Hi", None) };
    assert!(matches!(
        t.core.templates().add_version(&who, TemplateId::parse_or_none(&id), broken).await,
        Err(Error::TemplateSyntax(_))
    ));
    assert_eq!(
        t.core
            .templates()
            .add_version(&who, TemplateId::parse_or_none("01ARZ3NDEKTSV4RRFFQ69G5FAV"), version("Hi", None))
            .await,
        Err(Error::NotFound("template"))
    );
    assert_eq!(t.core.templates().get(&who, TemplateId::parse_or_none(&id)).await.unwrap(), template);
}

#[tokio::test]
async fn the_current_version_can_be_switched_and_the_template_renamed() {
    let t = TestCore::new();
    let who = full_key();
    let (template, [v1, _v2, v3]) = three_versions(&t, &who).await;
    let id = template.id.to_string();

    let switched = t
        .core
        .templates()
        .update(
            &who,
            TemplateId::parse_or_none(&id),
            UpdateTemplateRequest { name: None, current_version_id: Some(v1.id.to_string()) },
        )
        .await
        .unwrap();
    let renamed = t
        .core
        .templates()
        .update(
            &who,
            TemplateId::parse_or_none(&id),
            UpdateTemplateRequest { name: Some(" Hello ".to_owned()), current_version_id: None },
        )
        .await
        .unwrap();

    assert_eq!(switched.current_version_id, v1.id);
    assert_eq!(renamed.name, "Hello");
    assert_eq!(renamed.current_version_id, v1.id);
    assert_eq!(t.core.templates().get(&who, TemplateId::parse_or_none(&id)).await.unwrap(), renamed);
    let rendered = t
        .core
        .templates()
        .render(
            &who,
            TemplateId::parse_or_none(&id),
            RenderTemplateRequest { variables: None, version_id: Some(v3.id.to_string()) },
        )
        .await
        .unwrap();
    assert_eq!(rendered.subject, "Third");
}

#[tokio::test]
async fn switching_to_a_version_of_another_template_is_a_validation_error() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let other = welcome(&t, &who).await;
    let id = template.id.to_string();
    let to = |v: &str| UpdateTemplateRequest { name: None, current_version_id: Some(v.to_owned()) };

    assert_eq!(
        invalid_fields(
            t.core
                .templates()
                .update(&who, TemplateId::parse_or_none(&id), to(&other.current_version_id.to_string()))
                .await
        ),
        ["currentVersionId"]
    );
    assert_eq!(
        invalid_fields(t.core.templates().update(&who, TemplateId::parse_or_none(&id), to("v1")).await),
        ["currentVersionId"]
    );
    let both = UpdateTemplateRequest { name: Some(String::new()), current_version_id: Some("v1".to_owned()) };
    assert_eq!(
        invalid_fields(t.core.templates().update(&who, TemplateId::parse_or_none(&id), both).await),
        ["name", "currentVersionId"]
    );
    assert_eq!(t.core.templates().get(&who, TemplateId::parse_or_none(&id)).await.unwrap(), template);
}

// --- the send use case's lookup -------------------------------------------------------------

#[tokio::test]
async fn a_pinned_version_wins_over_the_current_one() {
    let t = TestCore::new();
    let who = full_key();
    let (template, [v1, v2, v3]) = three_versions(&t, &who).await;
    let ws = who.workspace_id;
    let tid = template.id.to_string();

    assert_eq!(t.core.templates().resolve_version(ws, None, None).await, Ok(None));
    assert_eq!(t.core.templates().resolve_version(ws, Some(&tid), None).await, Ok(Some(v2)));
    assert_eq!(t.core.templates().resolve_version(ws, None, Some(&v3.id.to_string())).await, Ok(Some(v3)));
    assert_eq!(t.core.templates().resolve_version(ws, Some(&tid), Some(&v1.id.to_string())).await, Ok(Some(v1)));
}

#[tokio::test]
async fn unknown_or_inconsistent_template_ids_name_the_field_at_fault() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let other = welcome(&t, &who).await;
    let stranger = full_key();
    let theirs = welcome(&t, &stranger).await;
    let ws = who.workspace_id;
    let tid = template.id.to_string();
    let unknown = ulid().to_string();

    let fields = |r| invalid_fields::<Option<TemplateVersion>>(r);
    assert_eq!(fields(t.core.templates().resolve_version(ws, Some(&unknown), None).await), ["templateId"]);
    assert_eq!(fields(t.core.templates().resolve_version(ws, Some("bad id"), None).await), ["templateId"]);
    assert_eq!(
        fields(t.core.templates().resolve_version(ws, Some(&theirs.id.to_string()), None).await),
        ["templateId"]
    );
    assert_eq!(fields(t.core.templates().resolve_version(ws, None, Some(&unknown)).await), ["templateVersionId"]);
    assert_eq!(fields(t.core.templates().resolve_version(ws, None, Some("v1")).await), ["templateVersionId"]);
    assert_eq!(
        fields(t.core.templates().resolve_version(ws, None, Some(&theirs.current_version_id.to_string())).await),
        ["templateVersionId"]
    );
    assert_eq!(
        fields(t.core.templates().resolve_version(ws, Some(&tid), Some(&other.current_version_id.to_string())).await),
        ["templateVersionId"]
    );
    assert_eq!(
        fields(
            t.core
                .templates()
                .resolve_version(ws, Some("bad id"), Some(&template.current_version_id.to_string()))
                .await
        ),
        ["templateId"]
    );
}

// --- deletion, listing, isolation, scope ----------------------------------------------------

#[tokio::test]
async fn a_deleted_template_and_its_versions_are_gone() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let id = template.id.to_string();
    let version_id = template.current_version_id.to_string();

    t.core.templates().delete(&who, TemplateId::parse_or_none(&id)).await.unwrap();

    assert_eq!(t.core.templates().get(&who, TemplateId::parse_or_none(&id)).await, Err(Error::NotFound("template")));
    assert_eq!(t.core.templates().delete(&who, TemplateId::parse_or_none(&id)).await, Err(Error::NotFound("template")));
    assert_eq!(
        t.core.templates().render(&who, TemplateId::parse_or_none(&id), render_with(json!({"name": "x"}))).await,
        Err(Error::NotFound("template"))
    );
    assert_eq!(
        invalid_fields(t.core.templates().resolve_version(who.workspace_id, None, Some(&version_id)).await),
        ["templateVersionId"]
    );
    assert_eq!(
        t.core.templates().delete(&who, TemplateId::parse_or_none("bad id")).await,
        Err(Error::NotFound("template"))
    );
}

#[tokio::test]
async fn templates_are_listed_newest_first_in_pages() {
    let t = TestCore::new();
    let who = full_key();
    let mut made = Vec::new();
    for _ in 0..3 {
        made.push(welcome(&t, &who).await);
        // Ids made in one millisecond have no order among themselves.
        t.clock.advance(Duration::milliseconds(1));
    }

    let first = t.core.templates().list(&who, ListParams { limit: Some(2), cursor: None }).await.unwrap();
    let rest =
        t.core.templates().list(&who, ListParams { limit: Some(2), cursor: first.next_cursor.clone() }).await.unwrap();

    assert_eq!(first.items, [made[2].clone(), made[1].clone()]);
    assert_eq!(first.next_cursor, Some(made[1].id.to_string()));
    assert!(first.has_more);
    assert_eq!(rest.items, [made[0].clone()]);
    assert!(!rest.has_more);
    assert_eq!(
        invalid_fields(t.core.templates().list(&who, ListParams { limit: Some(201), cursor: None }).await),
        ["limit"]
    );
}

#[tokio::test]
async fn another_workspace_cannot_see_or_touch_a_template() {
    let t = TestCore::new();
    let owner = full_key();
    let other = full_key();
    let template = welcome(&t, &owner).await;
    let id = template.id.to_string();

    assert_eq!(t.core.templates().get(&other, TemplateId::parse_or_none(&id)).await, Err(Error::NotFound("template")));
    assert_eq!(
        t.core.templates().delete(&other, TemplateId::parse_or_none(&id)).await,
        Err(Error::NotFound("template"))
    );
    assert_eq!(
        t.core.templates().add_version(&other, TemplateId::parse_or_none(&id), version("x", None)).await,
        Err(Error::NotFound("template"))
    );
    assert_eq!(
        t.core
            .templates()
            .update(
                &other,
                TemplateId::parse_or_none(&id),
                UpdateTemplateRequest { name: Some("x".into()), current_version_id: None }
            )
            .await,
        Err(Error::NotFound("template"))
    );
    assert_eq!(
        t.core.templates().render(&other, TemplateId::parse_or_none(&id), render_with(json!({}))).await,
        Err(Error::NotFound("template"))
    );
    assert!(t.core.templates().list(&other, ListParams::default()).await.unwrap().items.is_empty());
    assert_eq!(t.core.templates().get(&owner, TemplateId::parse_or_none(&id)).await.unwrap(), template);
}

#[tokio::test]
async fn a_send_key_may_not_manage_or_render_templates() {
    let t = TestCore::new();
    let who = full_key();
    let template = welcome(&t, &who).await;
    let id = template.id.to_string();
    let key = send_key_beside(&who);
    let denied = Err::<(), _>(Error::InsufficientScope);

    assert_eq!(t.core.templates().create(&key, create("x", "y", None, None)).await.map(drop), denied);
    assert_eq!(t.core.templates().list(&key, ListParams::default()).await.map(drop), denied);
    assert_eq!(t.core.templates().get(&key, TemplateId::parse_or_none(&id)).await.map(drop), denied);
    assert_eq!(t.core.templates().delete(&key, TemplateId::parse_or_none(&id)).await, denied);
    assert_eq!(
        t.core.templates().add_version(&key, TemplateId::parse_or_none(&id), version("x", None)).await.map(drop),
        denied
    );
    assert_eq!(
        t.core
            .templates()
            .update(&key, TemplateId::parse_or_none(&id), UpdateTemplateRequest::default())
            .await
            .map(drop),
        denied
    );
    assert_eq!(
        t.core
            .templates()
            .render(&key, TemplateId::parse_or_none(&id), render_with(json!({"name": "x"})))
            .await
            .map(drop),
        denied
    );
    assert_eq!(t.core.templates().get(&who, TemplateId::parse_or_none(&id)).await.unwrap(), template);
}
