//! Workspaces: the unit of isolation. Every other resource belongs to exactly one.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};

use crate::ids::WorkspaceId;

/// A workspace, created by the operator.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workspace {
    /// Id.
    pub id: WorkspaceId,
    /// Operator's label.
    pub name: String,
    /// Creation time.
    pub created_at: DateTime<Utc>,
}
