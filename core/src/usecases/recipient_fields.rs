//! `to`, `cc` and `bcc` of a send as the client wrote them, and their validation into the
//! message's recipients (docs/api.md#recipients, contract §10): each one address or an array
//! of 1–50, each entry `local@domain` or `Display Name <local@domain>`, at most 50 distinct
//! recipients across the three, a repeated address receiving once in the first list that
//! names it. Faults are named as the client wrote them: `to`, `cc[3]`.

use serde_json::Value;

use crate::email::Mailbox;
use crate::error::FieldError;
use crate::model::recipients::dedupe;
use crate::model::{MAX_RECIPIENTS, RecipientKind};
use crate::usecases::address_list::AddressList;

/// The recipients of a valid send, once each, in request order with their list.
pub(crate) type Named = Vec<(RecipientKind, Mailbox)>;

/// Checks the three lists; the recipients, or every fault found. `to` is required unless
/// `to_required` is false (a submitted message whose envelope recipients are all in `Cc:` or
/// none of its headers); there must be a recipient all the same.
pub(crate) fn validate_recipients(
    to: Option<&Value>,
    cc: Option<&Value>,
    bcc: Option<&Value>,
    to_required: bool,
) -> Result<Named, Vec<FieldError>> {
    // The common send: one address in `to`, nothing else; no counting or de-duplication.
    if let (Some(Value::String(text)), None | Some(Value::Null), None | Some(Value::Null)) = (to, cc, bcc) {
        return match Mailbox::parse(text) {
            Ok(mailbox) => Ok(vec![(RecipientKind::To, mailbox)]),
            Err(e) => Err(vec![FieldError::new("to", e.to_string())]),
        };
    }
    let mut fields = Vec::new();
    let to_list = match to {
        None | Some(Value::Null) if to_required => {
            fields.push(FieldError::new("to", "is required"));
            Vec::new()
        }
        None | Some(Value::Null) => Vec::new(),
        Some(value) => list("to", value, true, &mut fields),
    };
    let cc_list = cc.map(|v| list("cc", v, false, &mut fields)).unwrap_or_default();
    let bcc_list = bcc.map(|v| list("bcc", v, false, &mut fields)).unwrap_or_default();
    if to_list.is_empty() && cc_list.is_empty() && bcc_list.is_empty() && fields.is_empty() {
        fields.push(FieldError::new("to", "is required"));
    }
    if !fields.is_empty() {
        return Err(fields);
    }
    // The count is of distinct recipients; the list that takes it past the limit is named.
    let mut seen = std::collections::HashSet::new();
    for (name, list) in [("to", &to_list), ("cc", &cc_list), ("bcc", &bcc_list)] {
        for mailbox in list {
            seen.insert(mailbox.address.normalized());
        }
        if seen.len() > MAX_RECIPIENTS {
            let message = format!("takes the recipients past {MAX_RECIPIENTS} (to, cc and bcc together)");
            return Err(vec![FieldError::new(name, message)]);
        }
    }
    Ok(dedupe([(RecipientKind::To, to_list), (RecipientKind::Cc, cc_list), (RecipientKind::Bcc, bcc_list)]))
}

/// One list: a string or an array of strings. `to` must name at least one; an empty `cc` or
/// `bcc` array is none.
fn list(name: &str, value: &Value, required: bool, fields: &mut Vec<FieldError>) -> Vec<Mailbox> {
    let rule =
        AddressList { name, max: MAX_RECIPIENTS, empty_array: required.then_some("must name at least one address") };
    rule.read(value, Mailbox::parse, fields)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn fields_of(to: Value, cc: Option<Value>, bcc: Option<Value>) -> Vec<(String, String)> {
        match validate_recipients(Some(&to), cc.as_ref(), bcc.as_ref(), true) {
            Ok(_) => Vec::new(),
            Err(faults) => faults.into_iter().map(|f| (f.field, f.message)).collect(),
        }
    }

    #[test]
    fn one_address_or_arrays_with_display_names() {
        let named = validate_recipients(
            Some(&json!(["Ann <ann@x.test>", "bob@y.test"])),
            Some(&json!("Carol Co <carol@z.test>")),
            Some(&json!(["dan@x.test"])),
            true,
        )
        .unwrap();
        let shown: Vec<String> = named.iter().map(|(k, m)| format!("{}:{m}", k.as_str())).collect();
        assert_eq!(
            shown,
            ["to:\"Ann\" <ann@x.test>", "to:bob@y.test", "cc:\"Carol Co\" <carol@z.test>", "bcc:dan@x.test"]
        );
    }

    #[test]
    fn faults_are_named_as_written() {
        assert_eq!(fields_of(json!([]), None, None), [("to".to_owned(), "must name at least one address".to_owned())]);
        let bad = fields_of(json!(["a@x.test", "nope"]), Some(json!([1])), Some(json!({})));
        let names: Vec<&str> = bad.iter().map(|(f, _)| f.as_str()).collect();
        assert_eq!(names, ["to[1]", "cc[0]", "bcc"]);
        assert!(validate_recipients(None, None, None, true).is_err());
        assert!(validate_recipients(None, None, None, false).is_err(), "a recipient all the same");
        assert!(validate_recipients(None, Some(&json!("c@x.test")), None, false).is_ok());
    }

    #[test]
    fn fifty_distinct_recipients_at_most_naming_the_list_that_goes_over() {
        let to: Vec<String> = (0..30).map(|i| format!("t{i}@x.test")).collect();
        let cc: Vec<String> = (0..20).map(|i| format!("c{i}@x.test")).collect();
        // Repeats do not count: 30 + 20 distinct, and bcc repeats one of them.
        assert!(validate_recipients(Some(&json!(to)), Some(&json!(cc)), Some(&json!(["T0@x.test"])), true).is_ok());
        let over = fields_of(json!(to), Some(json!(cc)), Some(json!(["new@x.test"])));
        assert_eq!(over.len(), 1);
        assert_eq!(over[0].0, "bcc");
        let too_long: Vec<String> = (0..51).map(|i| format!("t{i}@x.test")).collect();
        assert_eq!(fields_of(json!(too_long), None, None)[0].0, "to");
    }
}
