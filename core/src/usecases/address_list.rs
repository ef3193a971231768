//! A field of a send that takes one email address or an array of them (`to`, `cc`, `bcc`,
//! `replyTo`): one shape, one set of faults, each entry parsed by the caller's parser and a
//! bad entry named by its place (`cc[2]`, `replyTo[1]`).

use std::fmt::Display;

use serde_json::Value;

use crate::error::FieldError;

/// How one address-list field is read.
pub(crate) struct AddressList<'a> {
    /// The field's name as the client wrote it.
    pub name: &'a str,
    /// Most entries an array may hold.
    pub max: usize,
    /// The fault for an empty array, or `None` when an empty array means no address.
    pub empty_array: Option<&'a str>,
}

impl AddressList<'_> {
    /// The entries of `value` (`null` is none), each parsed by `parse`; every fault goes to
    /// `fields`, and a list with a fault in its shape yields nothing.
    pub(crate) fn read<T, E: Display>(
        &self,
        value: &Value,
        parse: impl Fn(&str) -> Result<T, E>,
        fields: &mut Vec<FieldError>,
    ) -> Vec<T> {
        let name = self.name;
        let mut entry = |field: String, v: &Value| match v.as_str().map(&parse) {
            Some(Ok(parsed)) => Some(parsed),
            Some(Err(e)) => {
                fields.push(FieldError::new(field, e.to_string()));
                None
            }
            None => {
                fields.push(FieldError::new(field, "must be an email address string"));
                None
            }
        };
        match value {
            Value::Null => Vec::new(),
            Value::String(_) => entry(name.to_owned(), value).into_iter().collect(),
            Value::Array(items) if items.is_empty() => {
                if let Some(fault) = self.empty_array {
                    fields.push(FieldError::new(name, fault));
                }
                Vec::new()
            }
            Value::Array(items) if items.len() > self.max => {
                fields.push(FieldError::new(name, format!("must name at most {} addresses", self.max)));
                Vec::new()
            }
            Value::Array(items) => {
                items.iter().enumerate().filter_map(|(i, item)| entry(format!("{name}[{i}]"), item)).collect()
            }
            _ => {
                fields.push(FieldError::new(name, "must be an email address or an array of them"));
                Vec::new()
            }
        }
    }
}
