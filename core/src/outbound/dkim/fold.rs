//! The `DKIM-Signature` field as written: mail-auth's rendering, folded again so that every
//! verifier reads what mail-auth signed (docs/decisions.md, "Messages every receiver
//! authenticates").
//!
//! mail-auth (0.13) folds the signature's tag list at 76 columns, also right after the
//! `b=` value when that value ends at the margin, leaving `b=…\r\n\t;`. It signed the field
//! as `b=;`. RFC 6376 §3.7 deletes the `b=` value "including all surrounding whitespace", and
//! OpenDKIM and Mail::DKIM do; dkimpy deletes only the value and its inner folding and then
//! hashes `b= ;`, so it rejected the RSA signature of the commonest message shape. Writing
//! the value with nothing between it and the `;` satisfies both readings.
//!
//! The refolding keeps mail-auth's words and the places where it put white space, because
//! relaxed header canonicalization (which is what mail-auth signs the field with; the signer
//! sets it) turns any run of white space, folded or not, into one space and keeps "no white
//! space" as none: the field hashes the same however those places are folded. Inside the
//! `b=` value, which verifiers delete, white space may go anywhere. So the words are laid
//! out again greedily on lines of at most 78 octets, the `b=` value is broken wherever the
//! line is full and ends in `;` on the same line. A word longer than a line (a long `d=`
//! domain) gets a line of its own; none is near 998 octets, as a domain has at most 253.

/// Longest line the layout aims for (RFC 5322 §2.1.1).
const LINE: usize = 78;
/// How continuation lines start.
const FOLD: &str = "\r\n\t";

/// `rendered` (one `DKIM-Signature` field with its CRLF, as mail-auth writes it) folded
/// again, or `None` if it is not of the shape mail-auth writes (a field whose last tag is
/// `b=<base64>;`).
pub(super) fn refold(rendered: &str) -> Option<String> {
    let value = rendered.strip_prefix("DKIM-Signature:")?.strip_suffix("\r\n")?;
    let words: Vec<&str> = value.split([' ', '\t', '\r', '\n']).filter(|w| !w.is_empty()).collect();
    // The `b=` tag is last; its value may have been folded into several words, one of
    // which could itself start with `b=`, but only the tag follows a `;`.
    let b_at = (1..words.len()).find(|&i| words[i].starts_with("b=") && words[i - 1].ends_with(';'))?;
    let (tags, b_words) = words.split_at(b_at);
    let b_tag: String = b_words.concat();
    let signature = b_tag.strip_prefix("b=")?.strip_suffix(';')?;
    if signature.is_empty() || !signature.bytes().all(|c| c.is_ascii_alphanumeric() || b"+/=".contains(&c)) {
        return None;
    }

    let mut out = String::with_capacity(rendered.len() + 16);
    out.push_str("DKIM-Signature:");
    let mut column = out.len();
    for word in tags {
        if column + 1 + word.len() > LINE && column > 1 {
            out.push_str(FOLD);
            column = 1;
        } else {
            out.push(' ');
            column += 1;
        }
        out.push_str(word);
        column += word.len();
    }
    // `b=` and the first character of the value stay together, and so do the last one
    // and the `;`: a line break at either end would be white space next to the value.
    if column + " b=x".len() > LINE {
        out.push_str(FOLD);
        column = 1;
    } else {
        out.push(' ');
        column += 1;
    }
    out.push_str("b=");
    column += 2;
    let last = signature.len() - 1;
    for (i, c) in signature.char_indices() {
        let needs = if i == last { 2 } else { 1 };
        if column + needs > LINE && i > 0 {
            out.push_str(FOLD);
            column = 1;
        }
        out.push(c);
        column += 1;
    }
    out.push_str(";\r\n");
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Relaxed header canonicalization (RFC 6376 §3.4.2) of one field, with the `b=` value
    /// deleted as RFC 6376 §3.7 says, surrounding white space included.
    fn canonical_without_b(field: &str) -> String {
        let (name, value) = field.split_once(':').unwrap();
        let unfolded = value.replace("\r\n", "");
        let collapsed = unfolded.split([' ', '\t']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        let (tags, b) = collapsed.split_once("; b=").unwrap();
        let rest = b.find(';').map_or("", |end| &b[end..]);
        format!("{}:{tags}; b={rest}", name.to_ascii_lowercase())
    }

    /// The `b=` value of a field, without white space.
    fn signature(field: &str) -> String {
        let unfolded: String = field.chars().filter(|c| !c.is_whitespace()).collect();
        let b = unfolded.split_once(";b=").unwrap().1;
        b[..b.find(';').unwrap()].to_owned()
    }

    const MAIL_AUTH: &str = concat!(
        "DKIM-Signature: v=1; a=rsa-sha256; s=DKIM; d=acme.example.com; c=relaxed/relaxed;\r\n",
        "\th=From:To:Subject:Date:Message-ID:MIME-Version:Content-Type:Reply-To:Cc\r\n",
        "\t:In-Reply-To:References; t=1700000000; bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJ\r\n",
        "\tWZG3hSuFU=; b=AAAABBBBCCCCDDDDEEEEFFFFGGGGHHHHIIIIJJJJKKKKLLLLMMMMNNNNOOOOPPPPQQQ\r\n",
        "\tQRRRRSSSSTTTTUUUUVVVVWWWWXXXXYYYYZZZZaaaabbbbccccddddeeeeffffgggghhhhiiiijjjj\r\n",
        "\tkkkkb=\r\n",
        "\t;\r\n",
    );

    #[test]
    fn a_fold_after_the_signature_value_is_removed_and_the_rest_hashes_the_same() {
        let folded = refold(MAIL_AUTH).unwrap();

        assert!(!folded.contains("\t;"), "{folded}");
        assert!(folded.ends_with("kkkkb=;\r\n"), "{folded}");
        assert_eq!(canonical_without_b(&folded), canonical_without_b(MAIL_AUTH));
        assert_eq!(signature(&folded), signature(MAIL_AUTH), "the signature itself is unchanged");
        for line in folded.trim_end().split("\r\n") {
            assert!(line.len() <= LINE, "{line:?}");
        }
    }

    #[test]
    fn the_signature_value_ends_on_the_line_of_its_semicolon_at_every_length() {
        for len in 1..=400 {
            let rendered = format!(
                "DKIM-Signature: v=1; a=ed25519-sha256; s=DKIM2; d=a.example; c=relaxed/relaxed;\r\n\th=From:To; t=1; bh=x; b={};\r\n",
                "A".repeat(len)
            );
            let folded = refold(&rendered).unwrap();
            assert!(folded.ends_with("A;\r\n"), "{len}: {folded}");
            assert!(!folded.contains("b=\r\n"), "{len}: {folded}");
            assert!(folded.trim_end().split("\r\n").all(|l| l.len() <= LINE), "{len}: {folded}");
            assert_eq!(canonical_without_b(&folded), canonical_without_b(&rendered));
        }
    }

    /// The field as dkimpy hashes it: the `b=` value and the white space inside it deleted,
    /// white space after it kept, then relaxed canonicalization (RFC 6376 §3.4.2).
    fn dkimpy_canonical(field: &str) -> String {
        let field = field.trim_end_matches("\r\n");
        let at = field.find(" b=").or_else(|| field.find("\tb=")).unwrap() + 3;
        let (head, value) = field.split_at(at);
        let mut rest = value;
        loop {
            let trimmed = rest.trim_start_matches([' ', '\t', '\r', '\n']);
            match trimmed.chars().next() {
                Some(c) if c.is_ascii_alphanumeric() || "+/=".contains(c) => rest = &trimmed[1..],
                _ => break,
            }
        }
        let (name, value) = format!("{head}{rest}").split_once(':').map(|(n, v)| (n.to_owned(), v.to_owned())).unwrap();
        let value = value.replace("\r\n", "");
        let value = value.split([' ', '\t']).filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
        format!("{}:{value}", name.to_ascii_lowercase())
    }

    #[test]
    fn every_layout_mail_auth_writes_is_refolded_into_what_it_signed_for_both_keys() {
        use mail_auth::common::headers::HeaderWriter;

        use crate::outbound::build_message;
        use crate::outbound::dkim::DomainSigner;
        use crate::outbound::test_support::{message_from, signing_domain};
        let domain = signing_domain("acme.example.com");
        let signer = DomainSigner::new(&domain).unwrap();
        let raw = build_message(&message_from(&domain), &domain, None).unwrap().raw;
        let signatures = [signer.rsa.sign(&raw).unwrap(), signer.ed25519.sign(&raw).unwrap()];
        let mut dkimpy_failed_before = [0; 2];

        // Other `t=` lengths and header lists move the `b=` value across mail-auth's margin
        // (enough extra names to cross it whatever the signed header list is).
        for (count, signed) in dkimpy_failed_before.iter_mut().zip(&signatures) {
            for digits in 1..=12 {
                for extra in 0..24 {
                    let mut moved = signed.clone();
                    moved.t = 10u64.pow(digits - 1);
                    moved.h.extend((0..extra).map(|i| format!("X-{i}")));
                    let mut hashed = Vec::new();
                    mail_auth::dkim::Signature { b: Vec::new(), ..moved.clone() }.write(&mut hashed, false);
                    let hashed = String::from_utf8(hashed).unwrap();
                    let field = moved.to_header();

                    let folded = refold(&field).unwrap();

                    assert_eq!(dkimpy_canonical(&folded), hashed, "{folded}");
                    assert_eq!(canonical_without_b(&folded), hashed, "{folded}");
                    assert_eq!(signature(&folded), signature(&field));
                    assert!(folded.trim_end().split("\r\n").all(|l| l.len() <= LINE), "{folded}");
                    *count += usize::from(dkimpy_canonical(&field) != hashed);
                }
            }
        }
        assert!(dkimpy_failed_before.iter().all(|&n| n > 0), "{dkimpy_failed_before:?}");
    }

    #[test]
    fn a_domain_longer_than_a_line_gets_a_line_of_its_own() {
        let domain = format!("{}.example", "d".repeat(200));
        let rendered = format!(
            "DKIM-Signature: v=1; a=rsa-sha256; s=DKIM; d={domain}; c=relaxed/relaxed;\r\n\th=From; bh=x; b=Zm9v;\r\n"
        );
        let folded = refold(&rendered).unwrap();
        assert!(folded.contains(&format!("\r\n\td={domain};\r\n")), "{folded}");
        assert!(folded.split("\r\n").all(|l| l.len() <= 998));
        assert_eq!(canonical_without_b(&folded), canonical_without_b(&rendered));
    }

    #[test]
    fn other_shapes_are_not_refolded() {
        for rendered in [
            "Subject: x\r\n",
            "DKIM-Signature: v=1; b=abc;",
            "DKIM-Signature: v=1; bh=x;\r\n",
            "DKIM-Signature: v=1; b=;\r\n",
            "DKIM-Signature: v=1; b=a b c\r\n",
            "DKIM-Signature: v=1 b=abc;\r\n",
            "DKIM-Signature: v=1; b=ab;c;\r\n",
        ] {
            assert_eq!(refold(rendered), None, "{rendered:?}");
        }
    }
}
