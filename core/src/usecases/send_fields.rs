//! The optional fields of `POST /v1/messages` as the client sent them, and their
//! validation into [`MessageExtras`]: every bad field is reported at once, named as the
//! client wrote it (`replyTo[2]`, `headers.X-Foo`, `tags[0].name`, `metadata.orderId`,
//! `attachments[1].filename`).

use std::collections::{BTreeMap, HashSet};

use serde::{Deserialize, Serialize};

use crate::email::EmailAddress;
use crate::error::FieldError;
use crate::model::MessageExtras;
use crate::model::extras::{
    Attachment, AttachmentContent, CustomHeader, LabelError, MAX_ATTACHMENTS, MAX_ATTACHMENTS_ENCODED_BYTES,
    MAX_HEADERS, MAX_METADATA_BYTES, MAX_REPLY_TO, MAX_TAGS, Metadata, Tag, check_metadata_key,
};
use crate::usecases::SendRequest;
use crate::usecases::address_list::AddressList;

/// One entry of `tags`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
pub struct TagRequest {
    /// `[A-Za-z0-9_-]`, 1–256 characters.
    pub name: String,
    /// Printable ASCII, 0–256 characters.
    pub value: String,
}

/// One entry of `attachments`.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct AttachmentRequest {
    /// File name shown to the recipient.
    pub filename: String,
    /// `type/subtype`.
    pub content_type: String,
    /// The file, standard base64 (shared with the message made from it, not copied).
    pub content: AttachmentContent,
    /// Makes it an inline part the HTML refers to as `cid:<contentId>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content_id: Option<String>,
}

/// Checks every optional field; the extras, or every fault found.
pub(crate) fn validate_extras(req: &SendRequest) -> Result<MessageExtras, Vec<FieldError>> {
    let mut fields = Vec::new();
    let extras = MessageExtras {
        reply_to: req.reply_to.as_ref().map(|v| reply_to(v, &mut fields)).unwrap_or_default(),
        headers: req.headers.as_ref().map(|v| headers(v, &mut fields)).unwrap_or_default(),
        tags: req.tags.as_deref().map(|v| tags(v, &mut fields)).unwrap_or_default(),
        metadata: req.metadata.as_ref().map(|v| metadata(v, &mut fields)).unwrap_or_default(),
        attachments: req.attachments.as_deref().map(|v| attachments(v, &mut fields)).unwrap_or_default(),
    };
    if fields.is_empty() { Ok(extras) } else { Err(fields) }
}

fn reply_to(value: &serde_json::Value, fields: &mut Vec<FieldError>) -> Vec<EmailAddress> {
    let rule = AddressList {
        name: "replyTo",
        max: MAX_REPLY_TO,
        empty_array: Some("must name at least one address when given as an array"),
    };
    rule.read(value, EmailAddress::parse, fields)
}

fn headers(value: &serde_json::Value, fields: &mut Vec<FieldError>) -> Vec<CustomHeader> {
    let map = match value {
        serde_json::Value::Null => return Vec::new(),
        serde_json::Value::Object(map) => map,
        _ => {
            fields.push(FieldError::new("headers", "must be a JSON object of header names to string values"));
            return Vec::new();
        }
    };
    if map.len() > MAX_HEADERS {
        fields.push(FieldError::new("headers", format!("must hold at most {MAX_HEADERS} headers")));
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(map.len());
    for (name, value) in map {
        let field = format!("headers.{name}");
        let Some(value) = value.as_str() else {
            fields.push(FieldError::new(field, "must be a string"));
            continue;
        };
        match CustomHeader::parse(name, value) {
            Ok(_) if !seen.insert(name.to_ascii_lowercase()) => {
                fields.push(FieldError::new(field, "is given twice (header names ignore case)"));
            }
            Ok(header) => out.push(header),
            Err(e) => fields.push(FieldError::new(field, e.to_string())),
        }
    }
    out
}

fn tags(items: &[TagRequest], fields: &mut Vec<FieldError>) -> Vec<Tag> {
    if items.len() > MAX_TAGS {
        fields.push(FieldError::new("tags", format!("must hold at most {MAX_TAGS} tags")));
        return Vec::new();
    }
    let mut seen = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match Tag::parse(&item.name, &item.value) {
            Ok(_) if !seen.insert(item.name.as_str()) => {
                fields.push(FieldError::new(format!("tags[{i}].name"), "is given twice"));
            }
            Ok(tag) => out.push(tag),
            Err(e @ LabelError::TagValue) => fields.push(FieldError::new(format!("tags[{i}].value"), e.to_string())),
            Err(e) => fields.push(FieldError::new(format!("tags[{i}].name"), e.to_string())),
        }
    }
    out
}

fn metadata(value: &serde_json::Value, fields: &mut Vec<FieldError>) -> Metadata {
    let map = match value {
        serde_json::Value::Null => return Metadata::default(),
        serde_json::Value::Object(map) => map,
        _ => {
            fields.push(FieldError::new("metadata", "must be a JSON object of string keys to string values"));
            return Metadata::default();
        }
    };
    let mut out = BTreeMap::new();
    let mut ok = true;
    for (key, value) in map {
        let field = format!("metadata.{key}");
        if let Err(e) = check_metadata_key(key) {
            fields.push(FieldError::new(field, e.to_string()));
            ok = false;
            continue;
        }
        match value.as_str() {
            Some(v) => {
                out.insert(key.clone(), v.to_owned());
            }
            None => {
                fields.push(FieldError::new(field, "must be a string"));
                ok = false;
            }
        }
    }
    if ok && Metadata::total_bytes(out.iter().map(|(k, v)| (k.as_str(), v.as_str()))) > MAX_METADATA_BYTES {
        fields.push(FieldError::new(
            "metadata",
            format!("keys and values together must be at most {MAX_METADATA_BYTES} bytes of UTF-8"),
        ));
    }
    Metadata::from_checked(out)
}

fn attachments(items: &[AttachmentRequest], fields: &mut Vec<FieldError>) -> Vec<Attachment> {
    if items.len() > MAX_ATTACHMENTS {
        fields.push(FieldError::new("attachments", format!("must hold at most {MAX_ATTACHMENTS} attachments")));
        return Vec::new();
    }
    let encoded: usize = items.iter().map(|a| a.content.as_str().len()).sum();
    if encoded > MAX_ATTACHMENTS_ENCODED_BYTES {
        fields.push(FieldError::new(
            "attachments",
            format!(
                "the attachments' base64 content must total at most {} MiB (it is {encoded} bytes)",
                MAX_ATTACHMENTS_ENCODED_BYTES / (1024 * 1024)
            ),
        ));
        return Vec::new();
    }
    let mut content_ids = HashSet::new();
    let mut out = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        match Attachment::parse(&item.filename, &item.content_type, item.content.clone(), item.content_id.as_deref()) {
            Ok(a) if a.content_id().is_some_and(|id| !content_ids.insert(id.to_owned())) => {
                fields.push(FieldError::new(format!("attachments[{i}].contentId"), "is given twice"));
            }
            Ok(a) => out.push(a),
            Err(e) => fields.push(FieldError::new(format!("attachments[{i}].{}", e.field()), e.to_string())),
        }
    }
    out
}
