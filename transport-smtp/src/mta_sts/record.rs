//! The `_mta-sts.<domain>` TXT record (RFC 8461 §3.1): whether the domain has a policy, and
//! its id, which changes whenever the policy does.

/// The one `v=STSv1` record of a domain. Only its id matters to a sender: extension fields
/// are checked for syntax and otherwise ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StsRecord {
    /// 1 to 32 ASCII letters and digits; compared exactly.
    pub id: String,
}

/// Why a domain's TXT records give no usable `v=STSv1` record. Each means "no policy
/// announced" (RFC 8461 §3.1); the text says which case it was, for logs.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RecordError {
    /// No TXT record starts with `v=STSv1;`.
    #[error("no TXT record starts with v=STSv1")]
    Missing,
    /// More than one does; RFC 8461 then asks senders to assume no policy.
    #[error("{0} TXT records start with v=STSv1, and exactly one is allowed")]
    Several(usize),
    /// The one record is not valid.
    #[error("the v=STSv1 record is invalid: {0}")]
    Invalid(&'static str),
}

/// The version tag every STSv1 record starts with (case-sensitive, RFC 8461's `%s"v=STSv1"`).
const VERSION: &str = "v=STSv1";

/// The `v=STSv1` record among a domain's TXT records (each with its strings joined): the
/// others are discarded, and there must be exactly one, which must be valid.
pub fn select(records: &[String]) -> Result<StsRecord, RecordError> {
    let mut candidates = records.iter().filter(|record| announces_sts(record));
    let first = candidates.next().ok_or(RecordError::Missing)?;
    let more = candidates.count();
    if more > 0 {
        return Err(RecordError::Several(more + 1));
    }
    parse(first)
}

/// Whether `record` is one RFC 8461 counts: `v=STSv1` followed by its separator (`;`,
/// optionally after spaces or tabs).
fn announces_sts(record: &str) -> bool {
    record.strip_prefix(VERSION).is_some_and(|rest| rest.trim_start_matches(is_wsp).starts_with(';'))
}

/// Parses one record: `v=STSv1`, then `;`-separated fields (`id=` exactly once, extensions
/// `name=value`), with an optional final `;` and spaces or tabs around each `;`.
pub fn parse(record: &str) -> Result<StsRecord, RecordError> {
    let rest = record.strip_prefix(VERSION).ok_or(RecordError::Invalid("it does not start with v=STSv1"))?;
    let rest = rest.trim_start_matches(is_wsp);
    let rest = rest.strip_prefix(';').ok_or(RecordError::Invalid("v=STSv1 is not followed by ';'"))?;
    let fields: Vec<&str> = rest.split(';').map(|field| field.trim_matches(is_wsp)).collect();
    // A final separator leaves one empty piece at the end; an empty piece anywhere else is
    // two separators in a row.
    let fields = match fields.split_last() {
        Some((&"", before)) => before,
        _ => &fields[..],
    };
    if fields.is_empty() {
        return Err(RecordError::Invalid("it has no fields"));
    }
    let mut id = None;
    for field in fields {
        let (name, value) = field.split_once('=').ok_or(RecordError::Invalid("a field is not name=value"))?;
        if name == "id" {
            if id.is_some() {
                return Err(RecordError::Invalid("id appears more than once"));
            }
            if value.is_empty() || value.len() > 32 || !value.bytes().all(|b| b.is_ascii_alphanumeric()) {
                return Err(RecordError::Invalid("the id is not 1 to 32 letters and digits"));
            }
            id = Some(value.to_owned());
        } else if !is_extension_name(name) || !is_extension_value(value) {
            return Err(RecordError::Invalid("an extension field is malformed"));
        }
    }
    id.map(|id| StsRecord { id }).ok_or(RecordError::Invalid("it has no id"))
}

fn is_wsp(c: char) -> bool {
    c == ' ' || c == '\t'
}

/// `(ALPHA / DIGIT) *31(ALPHA / DIGIT / "_" / "-" / ".")`.
pub(crate) fn is_extension_name(name: &str) -> bool {
    let bytes = name.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 32
        && bytes[0].is_ascii_alphanumeric()
        && bytes.iter().all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// `1*(%x21-3A / %x3C / %x3E-7E)`: visible ASCII except `;` and `=`.
fn is_extension_value(value: &str) -> bool {
    !value.is_empty() && value.bytes().all(|b| b.is_ascii_graphic() && b != b';' && b != b'=')
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn records(texts: &[&str]) -> Vec<String> {
        texts.iter().map(|text| (*text).to_owned()).collect()
    }

    #[test]
    fn the_one_sts_record_gives_its_id() {
        assert_eq!(select(&records(&["v=STSv1; id=20160831085700Z;"])).unwrap().id, "20160831085700Z");
        assert_eq!(select(&records(&["v=STSv1;id=abc"])).unwrap().id, "abc");
        assert_eq!(select(&records(&["v=STSv1 ;\tid=abc ; ext=yes ;"])).unwrap().id, "abc");
    }

    #[test]
    fn other_txt_records_are_ignored() {
        let found = select(&records(&["v=spf1 -all", "google-site-verification=x", "v=STSv1; id=1"])).unwrap();
        assert_eq!(found.id, "1");
        // Without its separator, the version is not an STSv1 record at all.
        assert_eq!(select(&records(&["v=STSv1", "v=STSv1; id=2"])).unwrap().id, "2");
        assert_eq!(select(&records(&["v=STSv10; id=3"])), Err(RecordError::Missing));
    }

    #[test]
    fn no_record_or_several_records_mean_no_policy() {
        assert_eq!(select(&[]), Err(RecordError::Missing));
        assert_eq!(select(&records(&["v=spf1 -all"])), Err(RecordError::Missing));
        assert_eq!(select(&records(&["v=STSv1; id=1", "v=STSv1; id=2"])), Err(RecordError::Several(2)));
        // The same record twice is still two.
        assert_eq!(select(&records(&["v=STSv1; id=1", "v=STSv1; id=1"])), Err(RecordError::Several(2)));
    }

    #[test]
    fn invalid_records_are_refused() {
        for bad in [
            "v=STSv1;",
            "v=STSv1; ;",
            "v=STSv1; id=",
            "v=STSv1; id=abc-def",
            "v=STSv1; id=123456789012345678901234567890123",
            "v=STSv1; id=1; id=2",
            "v=STSv1; ext=1",
            "v=STSv1; id=1;; ext=1",
            "v=STSv1; id=1; novalue",
            "v=STSv1; id=1; _bad=1",
            "v=STSv1; id=1; ext=a b",
            "v=STSv1; ID=1",
            "v=stsv1; id=1",
        ] {
            assert!(matches!(parse(bad), Err(RecordError::Invalid(_) | RecordError::Missing)), "{bad:?}");
        }
        assert_eq!(parse("v=STSv1; id=12345678901234567890123456789012").unwrap().id.len(), 32);
    }

    fn cases() -> u32 {
        std::env::var("TIDINGS_PROPTEST_CASES").ok().and_then(|n| n.parse().ok()).unwrap_or(256)
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(cases()))]

        /// Whatever the TXT records say, selecting never panics.
        #[test]
        fn arbitrary_records_never_panic(texts in proptest::collection::vec(any::<String>(), 0..4)) {
            let _ = select(&texts);
        }

        /// Records near the valid syntax too (the generic strings rarely start with v=STSv1).
        #[test]
        fn arbitrary_fields_never_panic(rest in "[ \t;=a-zA-Z0-9_.-]{0,60}") {
            let _ = select(&[format!("v=STSv1{rest}")]);
        }

        /// A well-formed record gives back its id, whatever extensions surround it.
        #[test]
        fn valid_records_give_their_id(
            id in "[a-zA-Z0-9]{1,32}",
            before in proptest::collection::vec(("[a-z][a-z0-9_.-]{0,8}", "[!-:<>-~]{1,8}"), 0..3),
            after in proptest::collection::vec(("[a-z][a-z0-9_.-]{0,8}", "[!-:<>-~]{1,8}"), 0..3),
            trailing in any::<bool>(),
        ) {
            let extension = |(name, value): &(String, String)| if name == "id" { None } else { Some(format!("{name}={value}")) };
            let mut fields: Vec<String> = before.iter().filter_map(extension).collect();
            fields.push(format!("id={id}"));
            fields.extend(after.iter().filter_map(extension));
            let mut text = format!("v=STSv1; {}", fields.join("; "));
            if trailing {
                text.push(';');
            }
            prop_assert_eq!(parse(&text), Ok(StsRecord { id: id.clone() }));
        }
    }
}
