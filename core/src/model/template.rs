//! Templates and their versions (docs/api.md#templates). Bodies are stored as written; they were
//! compiled once at creation to reject syntax errors.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::{TemplateId, TemplateVersionId, WorkspaceId};

/// One immutable version of a template.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TemplateVersion {
    /// Id (what a message records).
    pub id: TemplateVersionId,
    /// The template.
    pub template_id: TemplateId,
    /// 1 for the first, then consecutive.
    pub version_no: u32,
    /// Subject template.
    pub subject: String,
    /// HTML body template.
    pub html: Option<String>,
    /// Text body template.
    pub text: Option<String>,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}

/// A template with all its versions, oldest first.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Template {
    /// Id.
    pub id: TemplateId,
    /// Owning workspace.
    pub workspace_id: WorkspaceId,
    /// Name.
    pub name: String,
    /// The version used when a send names only the template.
    pub current_version_id: TemplateVersionId,
    /// Creation time.
    pub created_at: DateTime<Utc>,
    /// Versions by `version_no`.
    pub versions: Vec<TemplateVersion>,
}

impl Template {
    /// The current version (always present in a consistent store).
    pub fn current_version(&self) -> Option<&TemplateVersion> {
        self.versions.iter().find(|v| v.id == self.current_version_id)
    }
}
