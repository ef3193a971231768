//! TODO: filled by the domain-setup work.

/// What the generated DNS records say (placeholder until domain setup lands).
#[derive(Debug, Clone, Default)]
pub struct RecordPolicy;
